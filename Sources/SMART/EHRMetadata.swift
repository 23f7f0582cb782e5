import Foundation
import HTTPClient
import JSON

/// Discovery of an EHR's SMART configuration, cached per issuer with a TTL. Only
/// registered issuers reach it: callers check registration first.
public actor EHRMetadata {
    /// The outcome of the last discovery and JWKS fetch of an issuer, for `/readyz`.
    public struct Status: Sendable {
        public var discovery: String
        public var jwks: String
        public var checkedAt: Date?
    }

    private struct Entry {
        let configuration: SMARTConfiguration
        let fetchedAt: ContinuousClock.Instant
    }

    private let client: HTTPClient
    private let ttl: Duration
    private var cache: [String: Entry] = [:]
    private var statuses: [String: Status] = [:]

    public init(client: HTTPClient, ttl: Duration = .seconds(300)) {
        self.client = client
        self.ttl = ttl
    }

    /// The SMART configuration of `iss` (a registered FHIR base without trailing slash):
    /// `.well-known/smart-configuration`, else the CapabilityStatement's `oauth-uris`,
    /// plus the OpenID configuration's `issuer` and `jwks_uri` when they are missing.
    public func configuration(for iss: String) async throws(SMARTError) -> SMARTConfiguration {
        if let entry = cache[iss], ContinuousClock.now - entry.fetchedAt < ttl { return entry.configuration }
        do {
            let config = try await discover(iss)
            cache[iss] = Entry(configuration: config, fetchedAt: .now)
            record(iss) { $0.discovery = "ok" }
            return config
        } catch {
            record(iss) { $0.discovery = "failed: \(error.detail)" }
            throw error
        }
    }

    /// Records a JWKS fetch result for `/readyz`.
    public func recordJWKS(_ iss: String, _ result: String) {
        record(iss) { $0.jwks = result }
    }

    /// Every issuer's last results.
    public func allStatuses() -> [String: Status] { statuses }

    private func record(_ iss: String, _ update: (inout Status) -> Void) {
        var status = statuses[iss] ?? Status(discovery: "not yet", jwks: "not yet", checkedAt: nil)
        update(&status)
        status.checkedAt = Date()
        statuses[iss] = status
    }

    private func discover(_ iss: String) async throws(SMARTError) -> SMARTConfiguration {
        var config: SMARTConfiguration
        let smart = try await get(iss + "/.well-known/smart-configuration")
        if smart.status == 200 {
            config = try SMARTConfiguration.parseSMARTConfiguration(smart.body)
        } else {
            let metadata = try await get(iss + "/metadata")
            guard metadata.status == 200 else {
                throw SMARTError(.discovery, "no smart-configuration (HTTP \(smart.status)) and no metadata (HTTP \(metadata.status))")
            }
            config = try SMARTConfiguration.parseCapabilityStatement(metadata.body)
        }
        if config.issuer == nil || config.jwksURI == nil {
            let openid = try? await get(iss + "/.well-known/openid-configuration")
            if let openid, openid.status == 200, let json = try? JSONParser.parse(openid.body) {
                config.issuer = config.issuer ?? json["issuer"]?.stringValue
                config.jwksURI = config.jwksURI ?? json["jwks_uri"]?.stringValue
                try config.verifyEndpoints()
            }
        }
        return config
    }

    private func get(_ url: String) async throws(SMARTError) -> HTTPClientResponse {
        do {
            return try await client.execute(HTTPClientRequest(method: "GET", url: url, headers: [("Accept", "application/json")]))
        } catch {
            throw SMARTError(error.isTimeout ? .timeout : .discovery, "discovery request failed: \(error.failure)", cause: error)
        }
    }
}
