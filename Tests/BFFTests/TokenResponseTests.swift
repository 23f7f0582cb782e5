import SMART
import Testing

@Suite("token response parsing")
struct TokenResponseTests {
    static func parse(expiresIn: String) throws(SMARTError) -> TokenResponse {
        try TokenResponse.parse(Array(#"{"access_token":"at","token_type":"Bearer","expires_in":\#(expiresIn)}"#.utf8))
    }

    @Test("expires_in: a positive whole number, as a number or a string of digits; above a year it counts as a year",
          arguments: [("3600", 3600), (#""3600""#, 3600), ("1", 1), ("31536000", 31_536_000), ("31536001", 31_536_000),
                      ("1e13", 31_536_000), (#""99999999999999""#, 31_536_000), (#""99999999999999999999999999""#, 31_536_000)])
    func expiresIn(text: String, seconds: Int) throws {
        #expect(try Self.parse(expiresIn: text).expiresIn == seconds)
        #expect(TokenResponse.maxExpiresIn == 31_536_000)
    }

    @Test("expires_in that is not a positive whole number is taken as none: the token's life is unknown, not an error",
          arguments: ["0", "-5", "-1e13", #""0""#, #""-3600""#, "3600.5", #""1h""#, #""""#, "true", "null"])
    func expiresInUnusable(text: String) throws {
        #expect(try Self.parse(expiresIn: text).expiresIn == nil)
    }

    @Test("a NUL anywhere in the response, member names included, is reported (a sign-in refuses it); parsing keeps it")
    func nul() throws {
        let bytes = { (json: String) in Array(json.utf8) }
        #expect(try TokenResponse.parse(bytes(#"{"access_token":"at","token_type":"Bearer","intent":"a\u0000b"}"#)).holdsNUL)
        #expect(try TokenResponse.parse(bytes(#"{"access_token":"at","token_type":"Bearer","fhirContext":[{"k\u0000":1}]}"#)).holdsNUL)
        #expect(try !TokenResponse.parse(bytes(#"{"access_token":"at","token_type":"Bearer","intent":"ab"}"#)).holdsNUL)
    }

    @Test("an access token that cannot go in an Authorization field as it is (space, control character, non-ASCII, over 16 KiB) is refused",
          arguments: [#""abc def1234567890""#, #""abc\tdef""#, #""abc\r\nX-Injected: yes""#, #""abcé✓""#, #""abc\u007fdef""#,
                      "\"" + String(repeating: "a", count: 16_385) + "\""])
    func accessTokenForm(token: String) {
        #expect(throws: SMARTError.self) { try TokenResponse.parse(Array(#"{"access_token":\#(token),"token_type":"Bearer"}"#.utf8)) }
    }

    @Test("visible-ASCII access tokens are taken: base64, base64url, a JWT, = padding, {GUID}, a:b, 16 KiB")
    func accessTokenAccepted() throws {
        for token in ["AT0001+ab/cd+ef/gh==", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln-_~", "{0f8fad5b-d9cb-469f-a165-70867728950e}",
                      "client:abc=def", String(repeating: "a", count: 16_384)] {
            #expect(try TokenResponse.parse(Array(#"{"access_token":"\#(token)","token_type":"Bearer"}"#.utf8)).accessToken == token)
        }
    }

    @Test("an empty refresh_token is none: sent back, it could only be refused")
    func emptyRefreshToken() throws {
        #expect(try TokenResponse.parse(Array(#"{"access_token":"at","token_type":"Bearer","refresh_token":""}"#.utf8)).refreshToken == nil)
        #expect(try TokenResponse.parse(Array(#"{"access_token":"at","token_type":"Bearer","refresh_token":"rt"}"#.utf8)).refreshToken == "rt")
    }

    @Test("no expires_in: the token's life is unknown")
    func noExpiresIn() throws {
        #expect(try TokenResponse.parse(Array(#"{"access_token":"at","token_type":"bearer"}"#.utf8)).expiresIn == nil)
    }
}
