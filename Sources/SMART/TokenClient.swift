import HTTPClient
import HTTPCore
import JSON

/// Talks to an EHR's token and revocation endpoints.
public struct TokenClient: Sendable {
    public let client: HTTPClient

    public init(client: HTTPClient) { self.client = client }

    /// Exchanges an authorization code (RFC 6749 §4.1.3) with the PKCE verifier.
    public func exchange(code: String, verifier: String, redirectURI: String, clientID: String,
                         authentication: ClientAuthentication, tokenEndpoint: String) async throws(SMARTError) -> TokenResponse {
        let form = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                    ("code_verifier", verifier)]
        return try await post(form, clientID: clientID, authentication: authentication, tokenEndpoint: tokenEndpoint)
    }

    /// Uses a refresh token (RFC 6749 §6). `invalid_grant` is reported as `.invalidGrant`.
    public func refresh(refreshToken: String, clientID: String, authentication: ClientAuthentication,
                        tokenEndpoint: String) async throws(SMARTError) -> TokenResponse {
        let form = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        return try await post(form, clientID: clientID, authentication: authentication, tokenEndpoint: tokenEndpoint)
    }

    /// Revokes a token (RFC 7009). Failures are reported; callers log out locally anyway.
    /// The client authenticates as at the token endpoint: a `private_key_jwt` assertion's
    /// audience is `tokenEndpoint` (SMART, RFC 7523), not the revocation URL. So the request
    /// goes only to a revocation endpoint on the token endpoint's origin (`mayRevoke`).
    public func revoke(token: String, hint: String, clientID: String, authentication: ClientAuthentication,
                       revocationEndpoint: String, tokenEndpoint: String) async throws(SMARTError) {
        guard TokenClient.mayRevoke(at: revocationEndpoint, tokenEndpoint: tokenEndpoint) else {
            throw SMARTError(.discovery, TokenClient.revocationOffOrigin)
        }
        var form = [("token", token), ("token_type_hint", hint)]
        var headers = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")]
        try authentication.apply(clientID: clientID, tokenEndpoint: tokenEndpoint, form: &form, headers: &headers)
        let response = try await send(form, headers: headers, url: revocationEndpoint, endpoint: "revocation endpoint")
        guard response.status == 200 else { throw SMARTError(.tokenEndpoint, "revocation answered HTTP \(response.status)") }
    }

    /// Whether tokens may be sent to `revocationEndpoint` for revoking: only on the token
    /// endpoint's origin (scheme, host, port). The request carries a token and the client's
    /// credentials (its secret, or an assertion a token endpoint takes for 240 s); a discovery
    /// document naming a revocation endpoint elsewhere (a FHIR server or gateway in the wrong
    /// hands) would have them redeemed at the real token endpoint.
    public static func mayRevoke(at revocationEndpoint: String, tokenEndpoint: String) -> Bool {
        guard let origin = Origin.of(revocationEndpoint) else { return false }
        return origin == Origin.of(tokenEndpoint)
    }

    /// The largest token or revocation answer read: tokens, an ID token (16 KiB at most) and
    /// launch context, which is stored with each launch and served by `/context`, come to a
    /// few kilobytes; a bloated answer is refused, not stored.
    public static let maxAnswerBytes = 1 << 20

    /// Why `revoke` sent nothing to a revocation endpoint off the token endpoint's origin.
    public static let revocationOffOrigin = "the revocation endpoint is not on the token endpoint's origin: no token or client credentials are sent there"

    private func post(_ fields: [(String, String)], clientID: String, authentication: ClientAuthentication,
                      tokenEndpoint: String) async throws(SMARTError) -> TokenResponse {
        var form = fields
        var headers = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")]
        try authentication.apply(clientID: clientID, tokenEndpoint: tokenEndpoint, form: &form, headers: &headers)
        let response = try await send(form, headers: headers, url: tokenEndpoint)
        guard response.status == 200 else {
            // A 5xx is an outage whatever its body says (a gateway's page may carry any JSON):
            // RFC 6749 §5.2 errors, invalid_grant among them, come with 400.
            if response.status >= 500 {
                throw SMARTError(.tokenEndpoint, "the token endpoint is unavailable (HTTP \(response.status))")
            }
            let error = (try? JSONParser.parse(response.body))?["error"]?.stringValue
            // Only an error response is one (400, or 401 as some servers send): a redirect or
            // another status with that body is not the EHR refusing the grant.
            if error == "invalid_grant" && (response.status == 400 || response.status == 401) {
                throw SMARTError(.invalidGrant, "the EHR refused the grant (invalid_grant)")
            }
            throw SMARTError(.tokenEndpoint, "the token endpoint answered HTTP \(response.status)\(error.map { " (\(TokenClient.shown($0)))" } ?? "")")
        }
        return try TokenResponse.parse(response.body)
    }

    /// An EHR's `error` as problem details and logs show it: an error code (lower-case
    /// letters, digits, `_`, at most 64 bytes, as every OAuth and SMART code is), or a
    /// placeholder. The value is the EHR's, and one that echoed the request could hold a
    /// token or the client's secret.
    static func shown(_ error: String) -> String {
        let isCode = (1...64).contains(error.utf8.count)
            && error.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "_") }
        return isCode ? error : "an error value not shown"
    }

    /// A failure to reach the endpoint names no cause (connection refused, TLS): the
    /// endpoint is discovery's and the browser sees the detail, so it does not say how a
    /// host and port failed. (An HTTP answer's status is still said, and a timeout is 504:
    /// a sign-in's developer needs those.) Logs have the cause (`SMARTError.cause`).
    private func send(_ form: [(String, String)], headers: [(String, String)], url: String,
                      endpoint: String = "token endpoint") async throws(SMARTError) -> HTTPClientResponse {
        let body = PercentEncoding.formEncode(form)
        do {
            return try await client.execute(HTTPClientRequest(method: "POST", url: url, headers: headers, body: Array(body.utf8),
                                                              maxBodyBytes: TokenClient.maxAnswerBytes))
        } catch where error.isBodyTooLarge {
            throw SMARTError(.tokenEndpoint, "the \(endpoint)'s answer is larger than \(TokenClient.maxAnswerBytes >> 20) MiB", cause: error)
        } catch {
            throw SMARTError(error.isTimeout ? .timeout : .tokenEndpoint,
                             error.isTimeout ? "the \(endpoint) did not answer in time" : "the \(endpoint) could not be reached",
                             cause: error)
        }
    }
}
