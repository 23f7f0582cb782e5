/// A client registered with the sandbox. How it authenticates at the token endpoint
/// follows from what is set: `secret` → `client_secret_basic`, `publicKeyPEM` →
/// `private_key_jwt`, neither → a public client (`client_id` in the form, no secret).
public struct SandboxClient: Sendable {
    /// The `client_id`.
    public var id: String
    /// Redirect URIs, compared exactly (no prefix or pattern matching).
    public var redirectURIs: [String]
    /// The client secret for `client_secret_basic`, when set.
    public var secret: String?
    /// A PEM public key (RSA for RS384, P-384 for ES384) for `private_key_jwt`, when set.
    public var publicKeyPEM: String?

    /// A client; with neither `secret` nor `publicKeyPEM` it is a public client.
    public init(id: String, redirectURIs: [String], secret: String? = nil, publicKeyPEM: String? = nil) {
        self.id = id
        self.redirectURIs = redirectURIs
        self.secret = secret
        self.publicKeyPEM = publicKeyPEM
    }
}
