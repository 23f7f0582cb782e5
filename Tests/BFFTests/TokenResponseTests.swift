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

    @Test("no expires_in: the token's life is unknown")
    func noExpiresIn() throws {
        #expect(try TokenResponse.parse(Array(#"{"access_token":"at","token_type":"bearer"}"#.utf8)).expiresIn == nil)
    }
}
