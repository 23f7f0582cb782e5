import Cryptography
import JSON

/// Produces compact JWS (RFC 7515 §7.1): the sandbox's RS256 ID tokens and the BFF's RS384 /
/// ES384 `private_key_jwt` client assertions. The header's `alg` is set to the algorithm
/// used (replacing any other value in place), so header and signature cannot disagree.
public enum JWSSigner {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    public static func signRS256(header: JSONValue, claims: JSONValue, key: RSAPrivateKey) throws(CryptoError) -> String {
        try sign(header: header, claims: claims, algorithm: "RS256") { input throws(CryptoError) in try key.signPKCS1SHA256(input) }
    }

    /// RSASSA-PKCS1-v1_5 with SHA-384.
    public static func signRS384(header: JSONValue, claims: JSONValue, key: RSAPrivateKey) throws(CryptoError) -> String {
        try sign(header: header, claims: claims, algorithm: "RS384") { input throws(CryptoError) in try key.signPKCS1SHA384(input) }
    }

    /// ECDSA P-384 with SHA-384; the signature is raw r ‖ s (RFC 7518 §3.4).
    public static func signES384(header: JSONValue, claims: JSONValue, key: P384PrivateKey) throws(CryptoError) -> String {
        try sign(header: header, claims: claims, algorithm: "ES384") { input throws(CryptoError) in try key.signES384(input) }
    }

    private static func sign(header: JSONValue, claims: JSONValue, algorithm: String,
                             _ signer: ([UInt8]) throws(CryptoError) -> [UInt8]) throws(CryptoError) -> String {
        guard header.objectValue != nil, claims.objectValue != nil else { throw .invalidInput("JWS header and claims must be JSON objects") }
        let input = Base64URL.encode(header.setting("alg", .string(algorithm)).bytes) + "." + Base64URL.encode(claims.bytes)
        return input + "." + Base64URL.encode(try signer(Array(input.utf8)))
    }
}
