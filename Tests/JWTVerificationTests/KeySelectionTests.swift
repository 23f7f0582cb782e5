import Cryptography
import JSON
@testable import JWTVerification
import Testing

/// Key selection from the issuer's JWKS, the cache and its re-fetch limit, the key policy.
@Suite("ID token: keys, JWKS cache and key policy")
struct KeySelectionTests {
    @Test("unknown kid: one re-fetch finds the rotated key")
    func rotation() async throws {
        let endpoint = JWKSEndpoint([JWKSEndpoint.document([("k1", TestKeys.issuerKey.publicKey)]),
                                     JWKSEndpoint.document([("k1", TestKeys.issuerKey.publicKey), ("k2", TestKeys.rotatedKey.publicKey)])])
        let f = IDTokenFixture(endpoint: endpoint)
        _ = try await f.validate(try f.token())
        f.clock.advance(.seconds(11))
        _ = try await f.validate(try f.token(header: ["alg": "RS256", "kid": "k2"], key: TestKeys.rotatedKey))
        #expect(endpoint.count == 2)
        _ = try await f.validate(try f.token()) // k1 still cached, no fetch
        #expect(endpoint.count == 2)
    }

    @Test("a key the EHR withdrew stops verifying once the cached JWKS is an hour old; until then no fetch")
    func withdrawnKey() async throws {
        let endpoint = JWKSEndpoint([JWKSEndpoint.document([("k1", TestKeys.issuerKey.publicKey), ("k2", TestKeys.rotatedKey.publicKey)]),
                                     JWKSEndpoint.document([("k2", TestKeys.rotatedKey.publicKey)])])
        let f = IDTokenFixture(endpoint: endpoint)
        let withdrawn = try f.token()
        _ = try await f.validate(withdrawn)
        f.clock.advance(.seconds(3599))
        _ = try await f.validate(try f.token()) // fresh tokens signed with k1
        #expect(endpoint.count == 1, "no fetch within the hour")
        f.clock.advance(.seconds(2))
        await f.expectRejected(try f.token(), .unknownKey)
        #expect(endpoint.count == 2)
        _ = try await f.validate(try f.token(header: ["alg": "RS256", "kid": "k2"], key: TestKeys.rotatedKey))
        #expect(endpoint.count == 2)
    }

    @Test("a JWKS outage: the stale set keeps verifying its kids, and is re-fetched at most once per issuer every 10 s")
    func staleSetThroughOutage() async throws {
        let f = IDTokenFixture()
        _ = try await f.validate(try f.token())
        #expect(await f.validator.jwks.fetchFailure(issuer: f.issuer) == nil)
        f.clock.advance(.seconds(3601))
        f.endpoint.isDown = true
        _ = try await f.validate(try f.token())
        _ = try await f.validate(try f.token())
        #expect(f.endpoint.count == 2, "one re-fetch attempt for the stale set within 10 s")
        #expect(await f.validator.jwks.fetchFailure(issuer: f.issuer)?.contains("could not be fetched") == true, "the failure is reported")
        await f.expectRejected(try f.token(header: ["alg": "RS256", "kid": "forged"]), .unknownKey)
        #expect(f.endpoint.count == 2)
        f.clock.advance(.seconds(11))
        _ = try await f.validate(try f.token())
        _ = try await f.validate(try f.token())
        #expect(f.endpoint.count == 3, "after 10 s exactly one more attempt")
        f.endpoint.isDown = false
        f.clock.advance(.seconds(11))
        _ = try await f.validate(try f.token())
        #expect(await f.validator.jwks.fetchFailure(issuer: f.issuer) == nil, "a fetch that succeeds clears it")
    }

    @Test("a failed re-fetch for an unknown kid leaves the fresh set's verifications unreported; only a stale set's are")
    func failureWhileFresh() async throws {
        let f = IDTokenFixture()
        _ = try await f.validate(try f.token())
        f.clock.advance(.seconds(11))
        f.endpoint.isDown = true
        await f.expectRejected(try f.token(header: ["alg": "RS256", "kid": "forged"]), .jwksUnavailable)
        _ = try await f.validate(try f.token())
        #expect(await f.validator.jwks.fetchFailure(issuer: f.issuer) == nil, "the set that verified is fresh")
        f.clock.advance(.seconds(3600))
        _ = try await f.validate(try f.token())
        #expect(await f.validator.jwks.fetchFailure(issuer: f.issuer) != nil, "the set that verified is stale")
    }

    @Test("a stale JWKS serves through an outage only until 24 hours after its fetch")
    func staleGraceEnds() async throws {
        let f = IDTokenFixture()
        _ = try await f.validate(try f.token())
        f.endpoint.isDown = true
        f.clock.advance(.seconds(24 * 3600 - 1))
        _ = try await f.validate(try f.token())
        #expect(f.endpoint.count == 2)
        f.clock.advance(.seconds(3601))
        await f.expectRejected(try f.token(), .jwksUnavailable)
        #expect(f.endpoint.count == 3)
        await f.expectRejected(try f.token(), .jwksUnavailable) // throttled: the failure stands, no fetch
        #expect(f.endpoint.count == 3)
        f.endpoint.isDown = false
        f.clock.advance(.seconds(11))
        _ = try await f.validate(try f.token())
        #expect(f.endpoint.count == 4)
    }

    @Test("unknown kids re-fetch at most once per issuer every 10 s")
    func refetchRateLimited() async throws {
        let f = IDTokenFixture()
        _ = try await f.validate(try f.token())
        let forged = try f.token(header: ["alg": "RS256", "kid": "forged"])
        await f.expectRejected(forged, .unknownKey)
        #expect(f.endpoint.count == 1, "within 10 s of the last fetch no re-fetch happens")
        f.clock.advance(.seconds(9))
        for _ in 0..<5 { await f.expectRejected(forged, .unknownKey) }
        #expect(f.endpoint.count == 1)
        f.clock.advance(.seconds(2))
        for _ in 0..<5 { await f.expectRejected(forged, .unknownKey) }
        #expect(f.endpoint.count == 2, "after 10 s exactly one re-fetch")
    }

    @Test("the re-fetch limit is per issuer")
    func rateLimitPerIssuer() async throws {
        let endpoint = JWKSEndpoint.standard()
        let clock = ManualClock()
        let cache = JWKSCache(clock: { clock.now }) { try await endpoint.fetch($0) }
        _ = try await cache.key(for: "k1", issuer: "https://a.example", jwksURL: "https://a.example/jwks")
        await #expect(throws: JWTError.self) { try await cache.key(for: "k9", issuer: "https://a.example", jwksURL: "https://a.example/jwks") }
        _ = try await cache.key(for: "k1", issuer: "https://b.example", jwksURL: "https://b.example/jwks")
        #expect(endpoint.urls == ["https://a.example/jwks", "https://b.example/jwks"])
        #expect(await cache.fetchCount == ["https://a.example": 1, "https://b.example": 1])
    }

    @Test("concurrent tokens with an unknown kid share one fetch")
    func concurrentFetchesCoalesce() async throws {
        let endpoint = JWKSEndpoint([JWKSEndpoint.document([("k1", TestKeys.issuerKey.publicKey)])], delay: .milliseconds(200))
        let f = IDTokenFixture(endpoint: endpoint)
        let token = try f.token()
        try await withThrowingTaskGroup(of: IDTokenClaims.self) { group in
            for _ in 0..<8 { group.addTask { try await f.validate(token) } }
            for try await claims in group { #expect(claims.subject == "user-1") }
        }
        #expect(endpoint.count == 1)
    }

    @Test("a new JWKS URL for the issuer is fetched at once")
    func jwksURLChange() async throws {
        let endpoint = JWKSEndpoint.standard()
        let cache = JWKSCache { try await endpoint.fetch($0) }
        _ = try await cache.key(for: "k1", issuer: "https://a.example", jwksURL: "https://a.example/jwks")
        _ = try await cache.key(for: "k1", issuer: "https://a.example", jwksURL: "https://a.example/jwks2")
        #expect(endpoint.urls == ["https://a.example/jwks", "https://a.example/jwks2"])
    }

    @Test("an unreachable or broken JWKS is jwksUnavailable")
    func jwksUnavailable() async throws {
        let down = JWKSCache { _ in throw CancellationError() }
        await #expect(throws: JWTError.self) { try await down.key(for: "k1", jwksURL: "https://a.example/jwks") }
        do { _ = try await down.key(for: "k1", jwksURL: "https://a.example/jwks") } catch { #expect(error.kind == .jwksUnavailable) }
        let broken = JWKSCache { _ in Array(#"{"keys":[],"keys":[]}"#.utf8) }
        do {
            _ = try await broken.key(for: "k1", jwksURL: "https://a.example/jwks")
            Issue.record("accepted a JWKS with duplicate members")
        } catch { #expect(error.kind == .jwksUnavailable) }
    }

    @Test("a token without kid is accepted when the JWKS holds exactly one usable key")
    func missingKidOneKey() async throws {
        let f = IDTokenFixture(endpoint: JWKSEndpoint([JWKSEndpoint.document([(nil, TestKeys.issuerKey.publicKey)])]))
        _ = try await f.validate(try f.token(header: ["alg": "RS256"]))
        // One usable key beside unusable ones (an EC key, an encryption key) still counts as one.
        let mixed = JWKSet.document([JWK.encode(TestKeys.issuerKey.publicKey, keyID: "k1"),
                                     JWK.encode(try P384PrivateKey.generate().publicKey, keyID: "ec"),
                                     JWK.encode(TestKeys.attackerKey.publicKey, keyID: "enc").setting("use", "enc")]).bytes
        let g = IDTokenFixture(endpoint: JWKSEndpoint([mixed]))
        _ = try await g.validate(try g.token(header: ["alg": "RS256"]))
    }

    @Test("a token without kid is refused when the JWKS holds several keys")
    func missingKidSeveralKeys() async throws {
        let f = IDTokenFixture(endpoint: JWKSEndpoint([JWKSEndpoint.document([("a", TestKeys.issuerKey.publicKey),
                                                                               ("b", TestKeys.rotatedKey.publicKey)])]))
        await f.expectRejected(try f.token(header: ["alg": "RS256"]), .unknownKey)
    }

    @Test("a token without kid is refused when the JWKS holds a second RSA signing key, even one it cannot use (RS512, 1024-bit)")
    func missingKidUnusableSecondKey() async throws {
        let usable = JWK.encode(TestKeys.issuerKey.publicKey, keyID: "k1").removing("kid")
        let weak = try RSAPrivateKey.generate(bits: 1024)
        for second in [JWK.encode(TestKeys.rotatedKey.publicKey, keyID: "k2", algorithm: "RS512"), JWK.encode(weak.publicKey, keyID: "k2")] {
            let f = IDTokenFixture(endpoint: JWKSEndpoint([JWKSet.document([usable, second]).bytes]))
            await f.expectRejected(try f.token(header: ["alg": "RS256"]), .unknownKey)
        }
    }

    @Test("two keys with the token's kid are refused as ambiguous")
    func duplicateKid() async throws {
        let f = IDTokenFixture(endpoint: JWKSEndpoint([JWKSEndpoint.document([("k1", TestKeys.attackerKey.publicKey),
                                                                               ("k1", TestKeys.issuerKey.publicKey)])]))
        await f.expectRejected(try f.token(), .unknownKey)
    }

    @Test("a kid that another RSA signing key carries too is ambiguous, even when that key could not verify (1024-bit, RS384); keys of another type or use may share it (RFC 7517 §4.5)")
    func duplicateKidUnusableCopy() async throws {
        let good = JWK.encode(TestKeys.issuerKey.publicKey, keyID: "k1")
        for copy in [JWK.encode(try RSAPrivateKey.generate(bits: 1024).publicKey, keyID: "k1"),
                     JWK.encode(TestKeys.rotatedKey.publicKey, keyID: "k1", algorithm: "RS384")] {
            let f = IDTokenFixture(endpoint: JWKSEndpoint([JWKSet.document([good, copy]).bytes]))
            await f.expectRejected(try f.token(), .unknownKey)
        }
        for other in [JWK.encode(TestKeys.rotatedKey.publicKey, keyID: "k1").setting("use", "enc"),
                      JWK.encode(try P384PrivateKey.generate().publicKey, keyID: "k1")] {
            let f = IDTokenFixture(endpoint: JWKSEndpoint([JWKSet.document([good, other]).bytes]))
            _ = try await f.validate(try f.token())
        }
    }

    @Test("kids are compared byte for byte: a token's \"\u{212A}1\" (Kelvin sign) does not pick the key \"K1\"")
    func kidBytes() async throws {
        let f = IDTokenFixture(endpoint: JWKSEndpoint([JWKSEndpoint.document([("K1", TestKeys.issuerKey.publicKey)])]))
        _ = try await f.validate(try f.token(header: ["alg": "RS256", "kid": "K1"]))
        await f.expectRejected(try f.token(header: ["alg": "RS256", "kid": "\u{212A}1"]), .unknownKey)
    }

    @Test("a JWK whose n or e has a leading zero octet (Java's BigInteger encoding, not RFC 7518's fewest octets) is the same key: it verifies")
    func nonMinimalIntegers() async throws {
        let key = TestKeys.issuerKey.publicKey
        for (member, bytes) in [("n", [0] + key.modulus), ("e", [0] + key.exponent)] {
            let jwk = JWK.encode(key, keyID: "k1").setting(member, .string(Base64URL.encode(bytes)))
            let f = IDTokenFixture(endpoint: JWKSEndpoint([JWKSet.document([jwk]).bytes]))
            _ = try await f.validate(try f.token())
        }
    }

    @Test("a first JWKS fetch that fails (down, not JSON, no keys) is tried again at most once per issuer every 10 s")
    func failedFirstFetchRateLimited() async throws {
        for answer in [nil, Array("<html>".utf8), Array(#"{"foo":1}"#.utf8)] {
            let clock = ManualClock()
            let url = "https://a.example/jwks"
            let cache = JWKSCache(clock: { clock.now }) { _ in
                guard let answer else { throw CancellationError() }
                return answer
            }
            for _ in 0..<8 {
                do {
                    _ = try await cache.key(for: "k1", jwksURL: url)
                    Issue.record("a key from a broken JWKS")
                } catch { #expect(error.kind == .jwksUnavailable) }
            }
            #expect(await cache.fetchCount[url] == 1)
            clock.advance(.seconds(11))
            _ = try? await cache.key(for: "k1", jwksURL: url)
            #expect(await cache.fetchCount[url] == 2)
        }
    }

    @Test("a 1024-bit key is unusable")
    func weak1024() async throws {
        let weak = try RSAPrivateKey.generate(bits: 1024)
        let document = JWKSEndpoint.document([("k1", weak.publicKey)])
        #expect(try JWKSet(json: document).keys.isEmpty)
        #expect(throws: JWTError.self) { try JWK.parseRSASigningKey(JWK.encode(weak.publicKey, keyID: "k1")) }
        let f = IDTokenFixture(endpoint: JWKSEndpoint([document]))
        await f.expectRejected(try f.token(key: weak), .weakKey)
    }

    @Test("a key with e = 3 is unusable")
    func weakExponent() async throws {
        let e3 = try RSAPublicKey(modulus: TestKeys.issuerKey.publicKey.modulus, exponent: [3])
        do {
            _ = try JWK.parseRSASigningKey(JWK.encode(e3, keyID: "k1"))
            Issue.record("e = 3 accepted")
        } catch { #expect(error.kind == .weakKey) }
        let f = IDTokenFixture(endpoint: JWKSEndpoint([JWKSEndpoint.document([("k1", e3)])]))
        await f.expectRejected(try f.token(), .weakKey)
    }

    @Test("a key over 4096 bits is unusable")
    func tooLarge() throws {
        let big = JWK.encode(TestKeys.issuerKey.publicKey, keyID: "k1")
            .setting("n", .string(Base64URL.encode([0xC1] + [UInt8](repeating: 0x55, count: 512))))
        #expect(throws: JWTError.self) { try JWK.parseRSASigningKey(big) }
    }

    @Test("JWKs for other uses, algorithms or key types are skipped", arguments: [
        ("use", JSONValue.string("enc")), ("alg", "RS384"), ("alg", "PS256"), ("kty", "EC"), ("key_ops", ["encrypt"]), ("kid", 7),
        ("n", "AQAB="), ("e", nil),
    ] as [(String, JSONValue?)])
    func skippedKeys(_ member: String, _ value: JSONValue?) throws {
        let jwk = JWK.encode(TestKeys.issuerKey.publicKey, keyID: "k1")
        #expect(try JWK.parseRSASigningKey(jwk) != nil)
        #expect(try JWK.parseRSASigningKey(value.map { jwk.setting(member, $0) } ?? jwk.removing(member)) == nil)
    }
}
