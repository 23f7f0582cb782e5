import Foundation
import HTTPClient
import JSON

/// Discovery of an EHR's SMART configuration, cached per issuer with a TTL. Only
/// registered issuers reach it: callers check registration first. Concurrent callers share
/// one discovery, and a failed one is answered from memory for `failureHold` (5 s), so that
/// an EHR in trouble gets a few requests from smart-bff, not one set per sign-in attempt.
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
    private let failureHold: Duration
    private var cache: [String: Entry] = [:]
    private var failures: [String: (error: SMARTError, at: ContinuousClock.Instant)] = [:]
    private var inFlight: [String: Task<SMARTConfiguration, any Error>] = [:]
    private var statuses: [String: Status] = [:]
    /// `jwks_uri`s found under OpenID issuers (`jwksURI(ofIssuer:)`), by issuer.
    private var issuerJWKS: [String: (uri: String, fetchedAt: ContinuousClock.Instant)] = [:]

    public init(client: HTTPClient, ttl: Duration = .seconds(300), failureHold: Duration = .seconds(5)) {
        self.client = client
        self.ttl = ttl
        self.failureHold = failureHold
    }

    /// The SMART configuration of `iss` (a registered FHIR base without trailing slash):
    /// `.well-known/smart-configuration`, else the CapabilityStatement's `oauth-uris`,
    /// plus the OpenID configuration's `issuer` and `jwks_uri` when they are missing.
    public func configuration(for iss: String) async throws(SMARTError) -> SMARTConfiguration {
        if let entry = cache[iss], ContinuousClock.now - entry.fetchedAt < ttl { return entry.configuration }
        if let failure = failures[iss], ContinuousClock.now - failure.at < failureHold { throw failure.error }
        let task: Task<SMARTConfiguration, any Error>
        if let running = inFlight[iss] {
            task = running
        } else {
            task = Task { [client] in try await EHRMetadata.discover(iss, client: client) }
            inFlight[iss] = task
        }
        let result = await task.result.mapError { $0 as? SMARTError ?? SMARTError(.discovery, "discovery failed: \($0)") }
        // The first caller to resume records the outcome, in the actor step that clears `inFlight`.
        if inFlight[iss] == task {
            inFlight[iss] = nil
            switch result {
            case let .success(config):
                cache[iss] = Entry(configuration: config, fetchedAt: .now)
                failures[iss] = nil
                record(iss) { $0.discovery = "ok" }
            case let .failure(error):
                failures[iss] = (error, .now)
                record(iss) { $0.discovery = "failed: \(error.detail)" }
            }
        }
        return try result.get()
    }

    /// The `jwks_uri` of the OpenID provider `issuer`, from its own discovery document,
    /// `{issuer}/.well-known/openid-configuration` (OpenID Connect Discovery §4), for an EHR
    /// whose SMART discovery names no JWKS: Epic before its August 2021 version publishes
    /// the document only under its OAuth server, not under the FHIR base. The document must
    /// name `issuer` as its own (§4.3); the issuer and the `jwks_uri` must be https (or
    /// loopback http), and on a loopback host only when the registered EHR `iss` is.
    public func jwksURI(ofIssuer issuer: String, for iss: String) async throws(SMARTError) -> String {
        // The issuer may come from discovery: nothing is fetched in cleartext off the machine,
        // nor on it for a remote EHR.
        guard URLPolicy.isUsableEndpoint(issuer), let parts = URLComponents(string: issuer), parts.query == nil else {
            throw SMARTError(.discovery, "the issuer is not an absolute https URL without a query")
        }
        guard URLPolicy.isUsableEndpoint(issuer, namedBy: iss) else {
            throw SMARTError(.discovery, "the issuer is on this machine (a loopback host) but the EHR is not")
        }
        // Cached by issuer, which two registrations may share: checked again for this one.
        if let known = issuerJWKS[issuer], ContinuousClock.now - known.fetchedAt < ttl, URLPolicy.isUsableEndpoint(known.uri, namedBy: iss) {
            return known.uri
        }
        let base = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        let answer = try await EHRMetadata.get(base + "/.well-known/openid-configuration", client: client)
        guard answer.status == 200 else { throw SMARTError(.discovery, "\(base)/.well-known/openid-configuration answered HTTP \(answer.status)") }
        guard let json = try? JSONParser.parse(answer.body) else { throw SMARTError(.discovery, "the issuer's openid-configuration is not JSON") }
        guard json["issuer"]?.stringValue == issuer else {
            throw SMARTError(.discovery, "the openid-configuration under \(issuer) names another issuer")
        }
        guard let uri = json["jwks_uri"]?.stringValue, URLPolicy.isUsableEndpoint(uri, namedBy: iss) else {
            throw SMARTError(.discovery, "the issuer's openid-configuration has no jwks_uri that is an absolute https URL")
        }
        issuerJWKS[issuer] = (uri, .now)
        return uri
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

    /// `.well-known/smart-configuration`; only when the EHR says it has none (`saysNone`),
    /// the CapabilityStatement. An EHR in trouble (429, 5xx, no answer) fails discovery, which is
    /// retried later: a configuration pieced together from the fallbacks lacks what the
    /// smart-configuration promises (RFC 9207's `iss`, S256) and would be cached for minutes.
    private static func discover(_ iss: String, client: HTTPClient) async throws(SMARTError) -> SMARTConfiguration {
        var config: SMARTConfiguration
        let smart = try await get(iss + "/.well-known/smart-configuration", client: client)
        if smart.status == 200 {
            config = try SMARTConfiguration.parseSMARTConfiguration(smart.body)
        } else if EHRMetadata.saysNone(smart.status) {
            let metadata = try await get(iss + "/metadata", client: client, maxBodyBytes: nil)
            guard metadata.status == 200 else {
                throw SMARTError(.discovery, "no smart-configuration (HTTP \(smart.status)) and no metadata (HTTP \(metadata.status))")
            }
            config = try SMARTConfiguration.parseCapabilityStatement(metadata.body)
        } else {
            throw SMARTError(.discovery, "smart-configuration answered HTTP \(smart.status)")
        }
        if config.issuer == nil || config.jwksURI == nil {
            // An EHR without OpenID Connect has no such document (`saysNone`); one that fails to
            // answer fails discovery, rather than caching a configuration without its JWKS.
            let openid = try await get(iss + "/.well-known/openid-configuration", client: client)
            if openid.status == 200 {
                guard let json = try? JSONParser.parse(openid.body) else { throw SMARTError(.discovery, "openid-configuration is not JSON") }
                config.issuer = config.issuer ?? json["issuer"]?.stringValue
                config.jwksURI = config.jwksURI ?? json["jwks_uri"]?.stringValue
            } else if !EHRMetadata.saysNone(openid.status) {
                throw SMARTError(.discovery, "openid-configuration answered HTTP \(openid.status)")
            }
        }
        try config.verifyEndpoints(namedBy: iss)
        return config
    }

    /// Whether a status says the document does not exist here (not found, gone, or a FHIR
    /// server refusing `.well-known` as an unknown resource type), rather than that the EHR
    /// could not answer now (408, 425, 429, 401, 403 from a gateway, 5xx).
    static func saysNone(_ status: Int) -> Bool {
        [400, 404, 405, 406, 410, 501].contains(status)
    }

    /// The largest `.well-known` document or JWKS read: they come to a few kilobytes (a JWKS of
    /// several keys with certificate chains, tens). A CapabilityStatement, which lists every
    /// resource and operation, may take the client's own limit (16 MiB).
    public static let maxDocumentBytes = 1 << 20

    private static func get(_ url: String, client: HTTPClient, maxBodyBytes: Int? = maxDocumentBytes) async throws(SMARTError) -> HTTPClientResponse {
        do {
            return try await client.execute(HTTPClientRequest(method: "GET", url: url, headers: [("Accept", "application/json")],
                                                              maxBodyBytes: maxBodyBytes))
        } catch where error.isBodyTooLarge {
            let limit = maxBodyBytes.map { "\($0 >> 20) MiB" } ?? "the client's limit"
            throw SMARTError(.discovery, "\(url) answered with more than \(limit)", cause: error)
        } catch {
            throw SMARTError(error.isTimeout ? .timeout : .discovery, "discovery request failed: \(error.failure)", cause: error)
        }
    }
}
