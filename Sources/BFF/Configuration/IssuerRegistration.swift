/// One EHR registration from `BFF_ISSUERS_FILE`.
public struct IssuerRegistration: Sendable {
    /// The FHIR base URL as the EHR sends it in `?iss=`, without a trailing slash.
    public var iss: String
    public var clientID: String
    /// Present for a confidential client using `client_secret_basic`.
    public var clientSecret: Secret<String>?
    /// Scope for EHR launches.
    public var scope: String
    /// Scope for standalone launches.
    public var standaloneScope: String
    /// PEM of the RSA or P-384 key for `private_key_jwt`.
    public var privateKeyPEM: Secret<String>?
    /// The `kid` under which the public key is published.
    public var privateKeyID: String?
    /// The EHR's OpenID issuer (`iss` of its ID tokens and RFC 9207 authorization responses),
    /// set for an EHR whose discovery names none or the wrong one. Nil: discovery's `issuer`.
    public var idTokenIssuer: String?

    public init(iss: String, clientID: String, clientSecret: Secret<String>? = nil,
                scope: String = "launch openid fhirUser patient/*.rs offline_access",
                standaloneScope: String = "launch/patient openid fhirUser patient/*.rs offline_access",
                privateKeyPEM: Secret<String>? = nil, privateKeyID: String? = nil) {
        self.iss = IssuerRegistration.normalize(iss)
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.scope = scope
        self.standaloneScope = standaloneScope
        self.privateKeyPEM = privateKeyPEM
        self.privateKeyID = privateKeyID
    }

    /// The issuer ID tokens must name: `idTokenIssuer`, else the one discovery named
    /// (`discovered`), else the FHIR base.
    public func openIDIssuer(discovered: String?) -> String { idTokenIssuer ?? discovered ?? iss }

    /// The authorization server's issuer, which RFC 9207's `iss` names: the one discovery
    /// named (`discovered`), else `idTokenIssuer`, else the FHIR base. It differs from
    /// `openIDIssuer` where an EHR's ID tokens name another issuer than its discovery does
    /// (Oracle Health: `…/tenants/{t}` and `…/tenants/{t}/oidc/idsps/{t}/`).
    public func authorizationServerIssuer(discovered: String?) -> String { discovered ?? idTokenIssuer ?? iss }

    /// `iss` compares without a trailing slash.
    public static func normalize(_ iss: String) -> String {
        var s = iss
        while s.hasSuffix("/") { s.removeLast() }
        return s
    }
}
