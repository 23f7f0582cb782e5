import Cryptography
import JSON

/// An RSA signing key from a JWKS, checked against smart-bff's key policy:
/// e = 65537 and a 2048–4096-bit modulus.
public struct JWK: Sendable {
    public let keyID: String?
    public let key: RSAPublicKey

    /// Parses one JWK; nil for keys that are not usable RSA RS256 signing keys
    /// (other kty, `use` other than sig, `alg` other than RS256, bad encoding).
    /// Throws `.weakKey` for RSA keys that fail the key policy.
    public static func parseRSASigningKey(_ json: JSONValue) throws(JWTError) -> JWK? {
        guard json.objectValue != nil, json["kty"]?.stringValue == "RSA" else { return nil }
        if let use = json["use"], use.stringValue != "sig" { return nil }
        if let alg = json["alg"], alg.stringValue != "RS256" { return nil }
        if let ops = json["key_ops"]?.arrayValue, !ops.contains(where: { $0.stringValue == "verify" }) { return nil }
        guard let nText = json["n"]?.stringValue, let eText = json["e"]?.stringValue,
              let n = Base64URL.decode(nText), let e = Base64URL.decode(eText) else { return nil }
        let kid = json["kid"]?.stringValue
        let modulus = Array(n.drop { $0 == 0 })
        guard Array(e.drop { $0 == 0 }) == [0x01, 0x00, 0x01] else { throw JWTError(.weakKey, "RSA exponent is not 65537", kid: kid) }
        let bits = modulus.isEmpty ? 0 : (modulus.count - 1) * 8 + (8 - modulus[0].leadingZeroBitCount)
        guard (2048...4096).contains(bits) else { throw JWTError(.weakKey, "RSA modulus of \(bits) bits", kid: kid) }
        do {
            return JWK(keyID: kid, key: try RSAPublicKey(modulus: modulus, exponent: [0x01, 0x00, 0x01]))
        } catch {
            return nil
        }
    }

    /// The public JWK of an RSA key (RS256 signing).
    public static func encode(_ key: RSAPublicKey, keyID: String, algorithm: String = "RS256") -> JSONValue {
        ["kty": "RSA", "use": "sig", "alg": .string(algorithm), "kid": .string(keyID),
         "n": .string(Base64URL.encode(key.modulus)), "e": .string(Base64URL.encode(key.exponent))]
    }

    /// The public JWK of a P-384 key (ES384 signing).
    public static func encode(_ key: P384PublicKey, keyID: String) -> JSONValue {
        let (x, y) = key.coordinates
        return ["kty": "EC", "use": "sig", "alg": "ES384", "crv": "P-384", "kid": .string(keyID),
                "x": .string(Base64URL.encode(x)), "y": .string(Base64URL.encode(y))]
    }
}

/// The usable RSA signing keys of a JWKS document.
public struct JWKSet: Sendable {
    public let keys: [JWK]

    public init(keys: [JWK]) { self.keys = keys }

    /// Parses a JWKS; keys that are unusable or fail the key policy are left out.
    public init(json bytes: [UInt8]) throws(JWTError) {
        let json: JSONValue
        do { json = try JSONParser.parse(bytes) } catch { throw .malformed("JWKS is not valid JSON") }
        guard let items = json["keys"]?.arrayValue else { throw .malformed("JWKS has no keys array") }
        var keys: [JWK] = []
        for item in items {
            if let key = try? JWK.parseRSASigningKey(item) { keys.append(key) }
        }
        self.keys = keys
    }

    /// The key for a token: the one with `kid`, or, for a token without `kid`, the only key.
    public func key(for kid: String?) throws(JWTError) -> RSAPublicKey {
        if let kid {
            let matches = keys.filter { $0.keyID == kid }
            guard matches.count == 1 else { throw JWTError(.unknownKey, matches.isEmpty ? "unknown kid" : "ambiguous kid", kid: kid) }
            return matches[0].key
        }
        guard keys.count == 1 else { throw JWTError(.unknownKey, "token has no kid and the JWKS has \(keys.count) signing keys") }
        return keys[0].key
    }
}
