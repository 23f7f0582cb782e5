import Cryptography
import Foundation
import JSON
@testable import JWTVerification
import Synchronization
import Testing

/// Fixed test keys (Fixtures/keys, made with `openssl genpkey -algorithm RSA`). Generating
/// them at run time blocked every test that reached them first behind a once-lock for
/// seconds on a loaded machine, and with them the whole concurrency pool.
enum TestKeys {
    static let issuerKey = load("issuer")
    static let rotatedKey = load("rotated")
    static let attackerKey = load("attacker")

    private static func load(_ name: String) -> RSAPrivateKey {
        let url = Bundle.module.url(forResource: "Fixtures/keys/" + name, withExtension: "pem")!
        return try! RSAPrivateKey(pem: String(decoding: try! Data(contentsOf: url), as: UTF8.self))
    }
}

/// A JWKS endpoint stub: serves its documents in order (the last one repeats) and records
/// every URL asked for; while `isDown`, every request is recorded and fails.
final class JWKSEndpoint: Sendable {
    struct Down: Error {}

    private let documents: Mutex<[[UInt8]]>
    private let requested = Mutex<[String]>([])
    private let down = Mutex(false)
    let delay: Duration

    init(_ documents: [[UInt8]], delay: Duration = .zero) {
        self.documents = Mutex(documents)
        self.delay = delay
    }

    func fetch(_ url: String) async throws -> [UInt8] {
        requested.withLock { $0.append(url) }
        if delay > .zero { try await Task.sleep(for: delay) }
        if isDown { throw Down() }
        return documents.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] }
    }

    var isDown: Bool {
        get { down.withLock { $0 } }
        set { down.withLock { $0 = newValue } }
    }

    var count: Int { requested.withLock { $0.count } }
    var urls: [String] { requested.withLock { $0 } }

    /// A JWKS document; a nil kid leaves `kid` out.
    static func document(_ keys: [(String?, RSAPublicKey)]) -> [UInt8] {
        JWKSet.document(keys.map { kid, key in
            let jwk = JWK.encode(key, keyID: kid ?? "x")
            return kid == nil ? jwk.removing("kid") : jwk
        }).bytes
    }

    /// The issuer's usual JWKS: its key under kid `k1`.
    static func standard() -> JWKSEndpoint { JWKSEndpoint([document([("k1", TestKeys.issuerKey.publicKey)])]) }
}

/// A clock tests move by hand.
final class ManualClock: Sendable {
    private let offset = Mutex<Duration>(.zero)
    private let start = ContinuousClock.now
    var now: ContinuousClock.Instant { start + offset.withLock { $0 } }
    func advance(_ d: Duration) { offset.withLock { $0 += d } }
}

/// One issuer, one client, a fixed time, and helpers that mint and validate tokens.
struct IDTokenFixture {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    /// The nonce the authorization request carried.
    static let sentNonce = "n-123"
    static var nowSeconds: Double { now.timeIntervalSince1970 }
    let issuer = "https://ehr.example/fhir", client = "app", nonce = IDTokenFixture.sentNonce, jwksURL = "https://ehr.example/jwks"
    let endpoint: JWKSEndpoint
    let clock = ManualClock()
    let validator: IDTokenValidator

    init(endpoint: JWKSEndpoint = .standard()) {
        self.endpoint = endpoint
        let clock = self.clock
        validator = IDTokenValidator(jwks: JWKSCache(clock: { clock.now }) { url in try await endpoint.fetch(url) },
                                     now: { IDTokenFixture.now })
    }

    /// Valid claims, with `changes` applied (nil removes a claim).
    func claims(_ changes: [(String, JSONValue?)] = []) -> JSONValue {
        var c: JSONValue = ["iss": .string(issuer), "sub": "user-1", "aud": .string(client),
                            "exp": .number(Self.nowSeconds + 300), "iat": .number(Self.nowSeconds - 10),
                            "nonce": .string(nonce), "fhirUser": "Practitioner/1"]
        for (k, v) in changes { c = v.map { c.setting(k, $0) } ?? c.removing(k) }
        return c
    }

    func token(header: JSONValue = ["alg": "RS256", "kid": "k1", "typ": "JWT"], claims: JSONValue? = nil,
               key: RSAPrivateKey = TestKeys.issuerKey) throws -> String {
        try JWSSigner.signRS256(header: header, claims: claims ?? self.claims(), key: key)
    }

    /// A token with the header bytes exactly as given (for `alg` other than RS256, duplicates),
    /// signed RS256 by `key`.
    func rawToken(header: [UInt8], payload: [UInt8], key: RSAPrivateKey = TestKeys.issuerKey) throws -> String {
        let input = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        return input + "." + Base64URL.encode(try key.signPKCS1SHA256(Array(input.utf8)))
    }

    func validate(_ token: String, nonce: String? = IDTokenFixture.sentNonce) async throws(JWTError) -> IDTokenClaims {
        try await validator.validate(token, issuer: issuer, clientID: client, nonce: nonce, jwksURL: jwksURL)
    }

    /// The error `token` is rejected with; records an issue if it is accepted.
    func rejection(_ token: String, nonce: String? = IDTokenFixture.sentNonce,
                   sourceLocation: SourceLocation = #_sourceLocation) async -> JWTError? {
        do {
            _ = try await validate(token, nonce: nonce)
            Issue.record("token was accepted", sourceLocation: sourceLocation)
            return nil
        } catch {
            return error
        }
    }

    /// Asserts that `token` is rejected with `kind` (and, for claims, `claim`).
    func expectRejected(_ token: String, _ kind: JWTError.Kind, claim: String? = nil, nonce: String? = IDTokenFixture.sentNonce,
                        sourceLocation: SourceLocation = #_sourceLocation) async {
        guard let error = await rejection(token, nonce: nonce, sourceLocation: sourceLocation) else { return }
        #expect(error.kind == kind, "\(error.debugDescription)", sourceLocation: sourceLocation)
        if let claim { #expect(error.failedClaim == claim, "\(error.debugDescription)", sourceLocation: sourceLocation) }
    }

    /// Asserts that valid claims with `changes` are rejected because of `claim`.
    func expectClaimRejected(_ claim: String, _ changes: [(String, JSONValue?)],
                             sourceLocation: SourceLocation = #_sourceLocation) async throws {
        await expectRejected(try token(claims: claims(changes)), .claim, claim: claim, sourceLocation: sourceLocation)
    }
}
