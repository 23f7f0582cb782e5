import Cryptography
import JSON

/// Checks a compact JWS against smart-bff's ID-token header policy and verifies its
/// signature.
///
/// Header policy: `alg` is RS256 and nothing else (`none`, HS256 and every other algorithm
/// are refused before any key is looked at); any `crit` is refused; `kid`, when present, is
/// a string; `typ`, when present, is `JWT` (any case).
///
/// `jku`, `x5u`, `jwk` and `x5c` are ignored, not refused: the key only ever comes from the
/// registered issuer's JWKS (by `kid`), so these headers are never fetched, parsed or
/// trusted, and a correctly signed token that happens to carry one is still valid. This is
/// the contract's wording ("never followed or trusted") and what OpenID Connect providers
/// expect of relying parties.
public enum JWSVerifier {
    /// The only algorithm accepted.
    public static let algorithm = "RS256"

    /// Checks the header policy; returns the `kid`, if any.
    public static func checkHeader(_ jws: CompactJWS) throws(JWTError) -> String? {
        guard let alg = jws.header["alg"] else { throw .malformed("no alg header") }
        guard let name = alg.stringValue else { throw .malformed("alg is not a string") }
        guard name == algorithm else { throw .unsupportedAlgorithm(name) }
        guard jws.header["crit"] == nil else { throw .criticalHeader }
        if let kid = jws.header["kid"], kid.stringValue == nil { throw .malformed("kid is not a string") }
        if let typ = jws.header["typ"], typ.stringValue?.uppercased() != "JWT" { throw .malformed("typ is not JWT") }
        return jws.keyID
    }

    /// Verifies the RS256 signature with `key`.
    public static func verifySignature(_ jws: CompactJWS, key: RSAPublicKey) throws(JWTError) {
        guard key.verifyPKCS1SHA256(signature: jws.signature, message: jws.signingInput) else { throw .badSignature(kid: jws.keyID) }
    }
}
