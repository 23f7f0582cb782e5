import JSON

/// What smart-bff needs from an EHR's discovery documents.
public struct SMARTConfiguration: Sendable, Equatable {
    public var authorizationEndpoint: String
    public var tokenEndpoint: String
    public var revocationEndpoint: String?
    public var jwksURI: String?
    /// The OpenID issuer (`iss` of ID tokens), when the EHR is an OpenID provider.
    public var issuer: String?
    public var codeChallengeMethods: [String]
    public var capabilities: [String]
    /// RFC 9207: the EHR sends `iss` with the authorization response.
    public var issParameterSupported: Bool

    public init(authorizationEndpoint: String, tokenEndpoint: String, revocationEndpoint: String? = nil,
                jwksURI: String? = nil, issuer: String? = nil, codeChallengeMethods: [String] = ["S256"],
                capabilities: [String] = [], issParameterSupported: Bool = false) {
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.jwksURI = jwksURI
        self.issuer = issuer
        self.codeChallengeMethods = codeChallengeMethods
        self.capabilities = capabilities
        self.issParameterSupported = issParameterSupported
    }

    /// Parses `.well-known/smart-configuration` and checks it is usable.
    public static func parseSMARTConfiguration(_ bytes: [UInt8]) throws(SMARTError) -> SMARTConfiguration {
        let json: JSONValue
        do { json = try JSONParser.parse(bytes) } catch { throw SMARTError(.discovery, "smart-configuration is not valid JSON") }
        guard let authorize = json["authorization_endpoint"]?.stringValue else {
            throw SMARTError(.discovery, "smart-configuration has no authorization_endpoint")
        }
        guard let token = json["token_endpoint"]?.stringValue else {
            throw SMARTError(.discovery, "smart-configuration has no token_endpoint")
        }
        let methods = json["code_challenge_methods_supported"]?.arrayValue?.compactMap(\.stringValue) ?? []
        guard methods.contains("S256") else {
            throw SMARTError(.discovery, "the EHR does not advertise PKCE S256 (code_challenge_methods_supported)")
        }
        let config = SMARTConfiguration(
            authorizationEndpoint: authorize, tokenEndpoint: token,
            revocationEndpoint: json["revocation_endpoint"]?.stringValue,
            jwksURI: json["jwks_uri"]?.stringValue, issuer: json["issuer"]?.stringValue,
            codeChallengeMethods: methods,
            capabilities: json["capabilities"]?.arrayValue?.compactMap(\.stringValue) ?? [],
            issParameterSupported: json["authorization_response_iss_parameter_supported"]?.boolValue ?? false)
        try config.verifyEndpoints()
        return config
    }

    /// Parses the `oauth-uris` extension of a CapabilityStatement (`{iss}/metadata`), the
    /// fallback for EHRs without `.well-known/smart-configuration`. SMART App Launch 2.x
    /// requires S256 of every server, which the CapabilityStatement cannot state.
    public static func parseCapabilityStatement(_ bytes: [UInt8]) throws(SMARTError) -> SMARTConfiguration {
        let json: JSONValue
        do { json = try JSONParser.parse(bytes) } catch { throw SMARTError(.discovery, "metadata is not valid JSON") }
        let oauthURL = "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris"
        var uris: [String: String] = [:]
        for rest in json["rest"]?.arrayValue ?? [] {
            for ext in rest["security"]?["extension"]?.arrayValue ?? [] where ext["url"]?.stringValue == oauthURL {
                for item in ext["extension"]?.arrayValue ?? [] {
                    if let name = item["url"]?.stringValue, let value = item["valueUri"]?.stringValue { uris[name] = value }
                }
            }
        }
        guard let authorize = uris["authorize"], let token = uris["token"] else {
            throw SMARTError(.discovery, "neither smart-configuration nor the CapabilityStatement's oauth-uris name the endpoints")
        }
        let config = SMARTConfiguration(authorizationEndpoint: authorize, tokenEndpoint: token, revocationEndpoint: uris["revoke"])
        try config.verifyEndpoints()
        return config
    }

    /// Endpoints must be absolute https URLs (http only on a loopback host, for development).
    func verifyEndpoints() throws(SMARTError) {
        for (name, url) in namedEndpoints where !URLPolicy.isUsableEndpoint(url) {
            throw SMARTError(.discovery, "\(name) is not an absolute https URL")
        }
    }

    /// Endpoints on a loopback host only for an EHR registered on one (`URLPolicy.isUsableEndpoint(_:namedBy:)`).
    func verifyEndpoints(namedBy iss: String) throws(SMARTError) {
        try verifyEndpoints()
        for (name, url) in namedEndpoints where !URLPolicy.isUsableEndpoint(url, namedBy: iss) {
            throw SMARTError(.discovery, "\(name) is on this machine (a loopback host) but the EHR is not")
        }
    }

    private var namedEndpoints: [(String, String)] {
        [("authorization_endpoint", authorizationEndpoint), ("token_endpoint", tokenEndpoint)]
            + [("revocation_endpoint", revocationEndpoint), ("jwks_uri", jwksURI)].compactMap { name, url in url.map { (name, $0) } }
    }
}
