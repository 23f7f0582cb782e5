import Cryptography
import JSON

/// One RSA signing key from an issuer's JWKS, already checked against `RSAKeyPolicy`
/// (Cryptography); and
/// the encoder for the public JWKs smart-bff and the sandbox publish.
public struct JWK: Sendable {
    /// The JWK `kid`, if it has one.
    public let keyID: String?
    public let key: RSAPublicKey

    public init(keyID: String?, key: RSAPublicKey) {
        self.keyID = keyID
        self.key = key
    }

    /// Parses one JWK. Returns nil for keys that are not RS256 signing keys at all (another
    /// `kty`, `use` other than `sig`, `alg` other than RS256, `key_ops` without `verify`, a
    /// non-string `kid`, `n` or `e` missing or not strict base64url). Throws `.weakKey` for
    /// RSA signing keys that fail the key policy.
    public static func parseRSASigningKey(_ json: JSONValue) throws(JWTError) -> JWK? {
        guard isRSASigningKey(json) else { return nil }
        if let alg = json["alg"], alg.stringValue != "RS256" { return nil }
        if let kid = json["kid"], kid.stringValue == nil { return nil }
        guard let nText = json["n"]?.stringValue, let eText = json["e"]?.stringValue,
              let n = Base64URL.decode(nText), let e = Base64URL.decode(eText) else { return nil }
        let kid = json["kid"]?.stringValue
        if let violation = RSAKeyPolicy.violation(modulus: n, exponent: e) { throw .weakKey(violation, kid: kid) }
        // A leading zero octet is not RFC 7518's fewest octets, but a common encoder's habit
        // (Java's BigInteger.toByteArray before a modulus's top bit): the same key.
        guard let key = try? RSAPublicKey(modulus: Array(n.drop { $0 == 0 }), exponent: RSAKeyPolicy.exponent) else { return nil }
        return JWK(keyID: kid, key: key)
    }

    /// Whether a JWKS entry is an RSA key for signatures (`kty` RSA, no other `use`, `verify`
    /// among its `key_ops` if it has any), whatever its `alg` or strength.
    static func isRSASigningKey(_ json: JSONValue) -> Bool {
        guard json.objectValue != nil, json["kty"]?.stringValue == "RSA" else { return false }
        if let use = json["use"], use.stringValue != "sig" { return false }
        if let ops = json["key_ops"], !(ops.arrayValue ?? []).contains(where: { $0.stringValue == "verify" }) { return false }
        return true
    }

    /// The public JWK of an RSA key: `kty` RSA, `use` sig, `alg`, `kid`, `n`, `e`.
    public static func encode(_ key: RSAPublicKey, keyID: String, algorithm: String = "RS256") -> JSONValue {
        ["kty": "RSA", "use": "sig", "alg": .string(algorithm), "kid": .string(keyID),
         "n": .string(Base64URL.encode(key.modulus)), "e": .string(Base64URL.encode(key.exponent))]
    }

    /// The public JWK of a P-384 key: `kty` EC, `crv` P-384, `alg` ES384, `x`, `y` (48 bytes each).
    public static func encode(_ key: P384PublicKey, keyID: String) -> JSONValue {
        let (x, y) = key.coordinates
        return ["kty": "EC", "use": "sig", "alg": "ES384", "crv": "P-384", "kid": .string(keyID),
                "x": .string(Base64URL.encode(x)), "y": .string(Base64URL.encode(y))]
    }
}
