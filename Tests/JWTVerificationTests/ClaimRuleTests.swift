import JSON
@testable import JWTVerification
import Testing

/// One test per claim rule of OpenID Connect Core §3.1.3.7 as the contract states it.
/// The fixture's clock stands at 1_800_000_000; the leeway is 60 s.
@Suite("ID token: claim rules")
struct ClaimRuleTests {
    let f = IDTokenFixture()
    let now = IDTokenFixture.nowSeconds

    @Test("iss must be the issuer exactly") func issMismatch() async throws {
        try await f.expectClaimRejected("iss", [("iss", "https://other.example/fhir")])
        try await f.expectClaimRejected("iss", [("iss", "https://ehr.example/fhir/")])
    }
    @Test("iss, aud and azp compare byte for byte: a canonically equivalent spelling (the Kelvin sign for K) is refused")
    func identifiersByBytes() {
        let (issuer, client) = ("https://ehr.example/fhirK", "appK")
        func check(_ changes: [(String, JSONValue?)]) -> String? {
            let claims = f.claims([("iss", .string(issuer)), ("aud", .string(client))] + changes)
            do { _ = try f.validator.checkClaims(claims, issuer: issuer, clientID: client, nonce: f.nonce); return nil } catch {
                return error.failedClaim ?? "\(error)"
            }
        }
        #expect(check([]) == nil)
        #expect(check([("azp", .string(client))]) == nil)
        #expect(check([("iss", "https://ehr.example/fhir\u{212A}")]) == "iss")
        #expect(check([("aud", "app\u{212A}")]) == "aud")
        #expect(check([("aud", ["app\u{212A}"])]) == "aud")
        #expect(check([("azp", "app\u{212A}")]) == "azp")
    }
    @Test("iss must be present") func issMissing() async throws { try await f.expectClaimRejected("iss", [("iss", nil)]) }

    @Test("aud as a string must be the client id") func audString() async throws {
        try await f.expectClaimRejected("aud", [("aud", "other-app")])
    }
    @Test("aud as an array of only the client id is accepted") func audArrayAccepted() async throws {
        _ = try await f.validate(try f.token(claims: f.claims([("aud", ["app"])])))
    }
    @Test("aud as an array with an extra audience is refused") func audExtraAudience() async throws {
        try await f.expectClaimRejected("aud", [("aud", ["app", "other"])])
        try await f.expectClaimRejected("aud", [("aud", ["other", "app"])])
        try await f.expectClaimRejected("aud", [("aud", [])])
    }
    @Test("aud must be present and a string or array") func audMissing() async throws {
        try await f.expectClaimRejected("aud", [("aud", nil)])
        try await f.expectClaimRejected("aud", [("aud", 1)])
    }

    @Test("azp, when present, must be the client id") func azp() async throws {
        _ = try await f.validate(try f.token(claims: f.claims([("azp", "app")])))
        try await f.expectClaimRejected("azp", [("azp", "other-app")])
        try await f.expectClaimRejected("azp", [("azp", .null)])
    }

    @Test("exp in the past (beyond the leeway) is refused") func expPast() async throws {
        try await f.expectClaimRejected("exp", [("exp", .number(now - 61))])
    }
    @Test("exp within the 60 s leeway is accepted; exactly at the leeway refused") func expLeeway() async throws {
        _ = try await f.validate(try f.token(claims: f.claims([("exp", .number(now - 59))])))
        try await f.expectClaimRejected("exp", [("exp", .number(now - 60))])
    }
    @Test("exp must be present and a JSON number") func expType() async throws {
        try await f.expectClaimRejected("exp", [("exp", nil)])
        try await f.expectClaimRejected("exp", [("exp", .string(String(Int(now) + 300)))])
    }

    @Test("iat must be present") func iatMissing() async throws { try await f.expectClaimRejected("iat", [("iat", nil)]) }
    @Test("iat in the future (beyond the leeway) is refused; within it accepted") func iatFuture() async throws {
        try await f.expectClaimRejected("iat", [("iat", .number(now + 61))])
        _ = try await f.validate(try f.token(claims: f.claims([("iat", .number(now + 59))])))
    }
    @Test("iat must be a JSON number") func iatType() async throws {
        try await f.expectClaimRejected("iat", [("iat", .string(String(Int(now))))])
    }

    @Test("nbf, when present, must not be in the future") func nbf() async throws {
        try await f.expectClaimRejected("nbf", [("nbf", .number(now + 120))])
        _ = try await f.validate(try f.token(claims: f.claims([("nbf", .number(now - 1))])))
    }

    @Test("sub must be present") func subMissing() async throws { try await f.expectClaimRejected("sub", [("sub", nil)]) }
    @Test("sub must be a non-empty string") func subEmpty() async throws {
        try await f.expectClaimRejected("sub", [("sub", "")])
        try await f.expectClaimRejected("sub", [("sub", 42)])
    }

    @Test("sub and fhirUser hold no control character") func controlCharacters() async throws {
        for bad in ["user\u{0}1", "user\n1", "user\u{7F}"] {
            try await f.expectClaimRejected("sub", [("sub", .string(bad))])
            try await f.expectClaimRejected("fhirUser", [("fhirUser", .string("Practitioner/" + bad))])
        }
    }

    @Test("nonce must equal the one sent") func nonceMismatch() async throws {
        try await f.expectClaimRejected("nonce", [("nonce", "other")])
        try await f.expectClaimRejected("nonce", [("nonce", "n-1234")])
    }
    @Test("nonce must be present when one was sent") func nonceMissing() async throws {
        try await f.expectClaimRejected("nonce", [("nonce", nil)])
    }
    @Test("a nonce is refused when none was sent; no nonce either way is accepted") func nonceNotSent() async throws {
        await f.expectRejected(try f.token(), .claim, claim: "nonce", nonce: nil)
        _ = try await f.validate(try f.token(claims: f.claims([("nonce", nil)])), nonce: nil)
    }

    @Test("fhirUser, when present, must be a string; absent is fine") func fhirUser() async throws {
        try await f.expectClaimRejected("fhirUser", [("fhirUser", ["Practitioner/1"])])
        let claims = try await f.validate(try f.token(claims: f.claims([("fhirUser", nil)])))
        #expect(claims.fhirUser == nil)
    }

    @Test("the error names the claim but its description stays generic")
    func errorDescription() async throws {
        let error = await f.rejection(try f.token(claims: f.claims([("aud", "secret-other-client")])))
        #expect(error?.failedClaim == "aud")
        #expect(error?.description == "ID token rejected: the aud claim is not acceptable")
        #expect(error?.debugDescription.contains("aud") == true)
    }
}
