import Cryptography
import Foundation
import JSON
@testable import JWTVerification
import Synchronization
import Testing

/// One named test per ID-token rule of the contract and per known attack.
@Suite("ID-token validation rules")
struct IDTokenRuleTests {
    static let key = try! RSAPrivateKey.generate(bits: 2048)
    static let otherKey = try! RSAPrivateKey.generate(bits: 2048)
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    let issuer = "https://ehr.example/fhir", client = "app", nonce = "n-123", jwksURL = "https://ehr.example/jwks"

    final class Fetcher: Sendable {
        let documents: Mutex<[[UInt8]]>
        let count = Atomic<Int>(0)
        init(_ documents: [[UInt8]]) { self.documents = Mutex(documents) }
        func fetch() -> [UInt8] {
            count.add(1, ordering: .relaxed)
            return documents.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] }
        }
    }

    static func jwks(_ keys: [(String?, RSAPublicKey)]) -> [UInt8] {
        (["keys": .array(keys.map { kid, key in
            var jwk = JWK.encode(key, keyID: kid ?? "x")
            if kid == nil { jwk = jwk.removing("kid") }
            return jwk
        })] as JSONValue).bytes
    }

    func validator(_ fetcher: Fetcher, clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) -> IDTokenValidator {
        IDTokenValidator(jwks: JWKSCache(clock: clock) { _ in fetcher.fetch() }, now: { IDTokenRuleTests.now })
    }

    func claims(_ changes: [(String, JSONValue?)] = []) -> JSONValue {
        var c: JSONValue = ["iss": .string(issuer), "sub": "user-1", "aud": .string(client), "exp": .number(IDTokenRuleTests.now.timeIntervalSince1970 + 300),
                            "iat": .number(IDTokenRuleTests.now.timeIntervalSince1970 - 10), "nonce": .string(nonce), "fhirUser": "Practitioner/1"]
        for (k, v) in changes { c = v.map { c.setting(k, $0) } ?? c.removing(k) }
        return c
    }

    func token(header: JSONValue = ["alg": "RS256", "kid": "k1", "typ": "JWT"], claims: JSONValue? = nil, key: RSAPrivateKey = IDTokenRuleTests.key) throws -> String {
        try JSWSign.sign(header: header, claims: claims ?? self.claims(), key: key)
    }

    func validate(_ token: String, fetcher: Fetcher? = nil, nonce: String? = "n-123") async throws -> IDTokenClaims {
        let f = fetcher ?? Fetcher([IDTokenRuleTests.jwks([("k1", IDTokenRuleTests.key.publicKey)])])
        return try await validator(f).validate(token, issuer: issuer, clientID: client, nonce: nonce, jwksURL: jwksURL)
    }

    func rejected(_ token: String, fetcher: Fetcher? = nil, _ kind: JWTError.Kind? = nil) async {
        do {
            _ = try await validate(token, fetcher: fetcher)
            Issue.record("accepted")
        } catch let error as JWTError {
            if let kind { #expect(error.kind == kind, "\(error)") }
        } catch { Issue.record("unexpected \(error)") }
    }

    @Test("a valid token is accepted and yields sub and fhirUser")
    func valid() async throws {
        let claims = try await validate(try token())
        #expect(claims.subject == "user-1" && claims.fhirUser == "Practitioner/1")
    }

    @Test("alg none is refused") func algNone() async throws {
        let unsigned = Base64URL.encode((["alg": "none"] as JSONValue).bytes) + "." + Base64URL.encode(claims().bytes) + "."
        await rejected(unsigned)
        await rejected(String(unsigned.dropLast()) + ".AA", .unsupportedAlgorithm)
    }

    @Test("HS256 signed with the RSA public key as the secret is refused") func hs256Confusion() async throws {
        let pem = Array(try IDTokenRuleTests.key.publicKey.pem.utf8)
        let input = Base64URL.encode((["alg": "HS256", "kid": "k1"] as JSONValue).bytes) + "." + Base64URL.encode(claims().bytes)
        let forged = input + "." + Base64URL.encode(HMACSHA256.authenticationCode(key: pem, message: Array(input.utf8)))
        await rejected(forged, .unsupportedAlgorithm)
    }

    @Test("RS384, PS256 and ES256 are refused (RS256 only)", arguments: ["RS384", "PS256", "ES256"])
    func otherAlgorithms(_ alg: String) async throws {
        await rejected(try token(header: ["alg": .string(alg), "kid": "k1"]), .unsupportedAlgorithm)
    }

    @Test("a signature by another key is refused") func wrongKey() async throws {
        await rejected(try token(key: IDTokenRuleTests.otherKey), .badSignature)
    }

    @Test("unknown kid: one re-fetch finds the rotated key; further unknown kids within 10 s do not re-fetch")
    func rotation() async throws {
        let fetcher = Fetcher([IDTokenRuleTests.jwks([("k1", IDTokenRuleTests.key.publicKey)]),
                               IDTokenRuleTests.jwks([("k1", IDTokenRuleTests.key.publicKey), ("k2", IDTokenRuleTests.otherKey.publicKey)])])
        let clock = ManualClock()
        let v = validator(fetcher, clock: { clock.now })
        _ = try await v.validate(try token(), issuer: issuer, clientID: client, nonce: nonce, jwksURL: jwksURL)
        clock.advance(.seconds(11))
        let rotated = try token(header: ["alg": "RS256", "kid": "k2"], key: IDTokenRuleTests.otherKey)
        _ = try await v.validate(rotated, issuer: issuer, clientID: client, nonce: nonce, jwksURL: jwksURL)
        #expect(fetcher.count.load(ordering: .relaxed) == 2)
        let forged = try token(header: ["alg": "RS256", "kid": "forged"])
        for round in 0..<2 {
            for _ in 0..<5 {
                await #expect(throws: JWTError.self) {
                    try await v.validate(forged, issuer: issuer, clientID: client, nonce: nonce, jwksURL: jwksURL)
                }
            }
            // Within 10 s of the last fetch no re-fetch happens; after 10 s, exactly one.
            #expect(fetcher.count.load(ordering: .relaxed) == 2 + round)
            clock.advance(.seconds(11))
        }
    }

    @Test("a token without kid: accepted with exactly one key, refused with several")
    func missingKid() async throws {
        let noKid = try token(header: ["alg": "RS256"])
        _ = try await validate(noKid, fetcher: Fetcher([IDTokenRuleTests.jwks([(nil, IDTokenRuleTests.key.publicKey)])]))
        await rejected(noKid, fetcher: Fetcher([IDTokenRuleTests.jwks([("a", IDTokenRuleTests.key.publicKey), ("b", IDTokenRuleTests.otherKey.publicKey)])]), .unknownKey)
    }

    @Test("jku, x5u, jwk and x5c headers are never used for the key", arguments: ["jku", "x5u", "jwk", "x5c"])
    func foreignKeyHeaders(_ name: String) async throws {
        // Signed by the attacker's key, which the header points at; the issuer's JWKS does not hold it.
        let attacker = IDTokenRuleTests.otherKey
        let pointer: JSONValue = name == "jwk" ? JWK.encode(attacker.publicKey, keyID: "k1") : (name == "x5c" ? ["MIIB"] : "https://attacker.example/keys")
        let header: JSONValue = ["alg": "RS256", "kid": "k1"]
        await rejected(try token(header: header.setting(name, pointer), key: attacker), .badSignature)
    }

    @Test("a crit header is refused") func crit() async throws {
        await rejected(try token(header: ["alg": "RS256", "kid": "k1", "crit": ["exp"], "exp": 1]), .criticalHeader)
    }

    @Test("weak keys in the JWKS are unusable", arguments: [1024, 3])
    func weakKeys(_ variant: Int) async throws {
        let weak: RSAPublicKey
        if variant == 1024 { weak = try RSAPrivateKey.generate(bits: 1024).publicKey } else {
            weak = try RSAPublicKey(modulus: IDTokenRuleTests.key.publicKey.modulus, exponent: [3])
        }
        let document = IDTokenRuleTests.jwks([("k1", weak)])
        #expect(try JWKSet(json: document).keys.isEmpty)
        await rejected(try token(), fetcher: Fetcher([document]), .unknownKey)
    }

    @Test("claims: each rule refuses its violation", arguments: [
        ("iss", JSONValue.string("https://other.example/fhir")), ("iss", nil), ("aud", "other-app"), ("aud", ["app", "other"]),
        ("aud", nil), ("azp", "other-app"), ("exp", .number(1_800_000_000 - 61)), ("exp", nil), ("exp", "1800000300"),
        ("iat", nil), ("iat", .number(1_800_000_000 + 61)), ("sub", nil), ("sub", ""), ("nonce", "other"), ("nonce", nil),
        ("nbf", .number(1_800_000_000 + 120)),
    ] as [(String, JSONValue?)])
    func claimRules(_ name: String, _ value: JSONValue?) async throws {
        do {
            _ = try await validate(try token(claims: claims([(name, value)])))
            Issue.record("accepted \(name)")
        } catch let error as JWTError {
            #expect(error.kind == .claim && error.failedClaim == name)
        }
    }

    @Test("claims: aud as a one-element array, azp equal to the client, exp within the 60 s leeway are accepted")
    func claimsAccepted() async throws {
        _ = try await validate(try token(claims: claims([("aud", ["app"]), ("azp", "app")])))
        _ = try await validate(try token(claims: claims([("exp", .number(1_800_000_000 - 30))])))
    }

    @Test("duplicate members in the header or the payload are refused")
    func duplicates() async throws {
        let header = Array(#"{"alg":"RS256","kid":"k1","alg":"none"}"#.utf8)
        let payload = Array(#"{"sub":"a","sub":"admin","iss":"https://ehr.example/fhir"}"#.utf8)
        for (h, p) in [(header, claims().bytes), ((["alg": "RS256", "kid": "k1"] as JSONValue).bytes, payload)] {
            let input = Base64URL.encode(h) + "." + Base64URL.encode(p)
            let signed = input + "." + Base64URL.encode(try IDTokenRuleTests.key.signPKCS1SHA256(Array(input.utf8)))
            await rejected(signed, .malformed)
        }
    }

    @Test("non-canonical base64url (padding, +/, trailing bits) is refused")
    func nonCanonical() async throws {
        let good = try token()
        let parts = good.split(separator: ".").map(String.init)
        await rejected(parts[0] + "=." + parts[1] + "." + parts[2], .malformed)
        await rejected(parts[0] + "." + parts[1] + "." + parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/") + (parts[2].contains("-") || parts[2].contains("_") ? "" : "+"), .malformed)
        // Flip an unused low bit of the last character of the signature part: same bytes, other text.
        var sig = Array(parts[2].utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        if sig.count % 4 != 0, let i = alphabet.firstIndex(of: sig[sig.count - 1]) {
            sig[sig.count - 1] = alphabet[i ^ 1]
            await rejected(parts[0] + "." + parts[1] + "." + String(decoding: sig, as: UTF8.self), .malformed)
        }
    }

    @Test("a token over 16 KiB is refused before anything else")
    func oversized() async throws {
        await rejected(try token(claims: claims([("pad", .string(String(repeating: "x", count: 17_000)))])), .malformed)
    }
}

/// Signs test tokens.
enum JSWSign {
    static func sign(header: JSONValue, claims: JSONValue, key: RSAPrivateKey) throws -> String {
        try JWSSigner.signRS256(header: header, claims: claims, key: key)
    }
}

/// A clock tests move by hand.
final class ManualClock: Sendable {
    private let offset = Mutex<Duration>(.zero)
    private let start = ContinuousClock.now
    var now: ContinuousClock.Instant { start + offset.withLock { $0 } }
    func advance(_ d: Duration) { offset.withLock { $0 += d } }
}
