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

    @Test("expires_in zero or negative is a malformed token response (it would have every read refresh)",
          arguments: ["0", "-5", "-1e13", #""0""#, #""-3600""#])
    func expiresInNotPositive(text: String) {
        #expect { try Self.parse(expiresIn: text) } throws: { error in
            (error as? SMARTError)?.kind == .tokenEndpoint && (error as? SMARTError)?.detail == "token response expires_in is not a positive number"
        }
    }

    @Test("expires_in that is no whole number is a malformed token response", arguments: ["3600.5", #""1h""#, #""""#, "true", "null"])
    func expiresInNotANumber(text: String) {
        #expect { try Self.parse(expiresIn: text) } throws: { error in
            (error as? SMARTError)?.kind == .tokenEndpoint && (error as? SMARTError)?.detail == "token response expires_in is not a number"
        }
    }

    @Test("no expires_in: the token's life is unknown")
    func noExpiresIn() throws {
        #expect(try TokenResponse.parse(Array(#"{"access_token":"at","token_type":"bearer"}"#.utf8)).expiresIn == nil)
    }
}
