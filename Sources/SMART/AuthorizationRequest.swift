/// The parameters of a SMART authorization request (`/launch` or `/login`).
public struct AuthorizationRequest: Sendable {
    public var authorizationEndpoint: String
    public var clientID: String
    public var redirectURI: String
    public var scope: String
    public var state: String
    /// The FHIR base URL (`aud`).
    public var audience: String
    /// The EHR's launch id (EHR launch only).
    public var launch: String?
    public var codeChallenge: String
    /// Sent when `openid` is in scope.
    public var nonce: String?

    public init(authorizationEndpoint: String, clientID: String, redirectURI: String, scope: String, state: String,
                audience: String, launch: String?, codeChallenge: String, nonce: String?) {
        self.authorizationEndpoint = authorizationEndpoint
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.scope = launch == nil ? scope : AuthorizationRequest.addingLaunchScope(scope)
        self.state = state
        self.audience = audience
        self.launch = launch
        self.codeChallenge = codeChallenge
        self.nonce = AuthorizationRequest.hasScope(self.scope, "openid") ? nonce : nil
    }

    /// The URL to redirect the browser to.
    public var url: String {
        var items: [(String, String)] = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI), ("scope", scope),
            ("state", state), ("aud", audience),
        ]
        if let launch { items.append(("launch", launch)) }
        items.append(("code_challenge", codeChallenge))
        items.append(("code_challenge_method", "S256"))
        if let nonce { items.append(("nonce", nonce)) }
        return URLPolicy.appendingQuery(authorizationEndpoint, items)
    }

    /// An EHR launch needs the `launch` scope.
    static func addingLaunchScope(_ scope: String) -> String {
        hasScope(scope, "launch") ? scope : "launch " + scope
    }

    public static func hasScope(_ scope: String, _ name: String) -> Bool {
        scope.split(separator: " ").contains { $0 == name }
    }
}
