import Cryptography
import JSON

/// Verifies a compact JWS under smart-bff's policy: RS256 only, no `crit` header, and
/// `jku`, `x5u`, `jwk` and `x5c` are never used (the key comes only from the issuer's JWKS).
public enum JWSVerifier {
    /// Checks the header policy; returns the `kid`, if any.
    public static func checkHeader(_ jws: CompactJWS) throws(JWTError) -> String? {
        guard let alg = jws.algorithm else { throw .malformed("no alg header") }
        guard alg == "RS256" else { throw JWTError(.unsupportedAlgorithm, "alg \(alg) is not allowed (RS256 only)") }
        guard jws.header["crit"] == nil else { throw JWTError(.criticalHeader, "crit header present") }
        if let kid = jws.header["kid"], kid.stringValue == nil { throw .malformed("kid is not a string") }
        if let typ = jws.header["typ"], typ.stringValue?.uppercased() != "JWT" { throw .malformed("typ is not JWT") }
        return jws.keyID
    }

    /// Verifies the signature with `key`.
    public static func verifySignature(_ jws: CompactJWS, key: RSAPublicKey) throws(JWTError) {
        guard key.verifyPKCS1SHA256(signature: jws.signature, message: jws.signingInput) else {
            throw JWTError(.badSignature, "signature does not verify", kid: jws.keyID)
        }
    }
}

/// Produces compact JWS (the sandbox's ID tokens, test tokens).
public enum JWSSigner {
    public static func signRS256(header: JSONValue, claims: JSONValue, key: RSAPrivateKey) throws -> String {
        let input = Base64URL.encode(header.bytes) + "." + Base64URL.encode(claims.bytes)
        return input + "." + Base64URL.encode(try key.signPKCS1SHA256(Array(input.utf8)))
    }
}
