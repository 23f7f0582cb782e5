internal import COpenSSL

/// An RSA private key for signing (the sandbox's ID tokens, `private_key_jwt` assertions).
///
/// `Sendable`: immutable once made; its one `EVPKey` owns the `EVP_PKEY*`, and OpenSSL
/// allows concurrent signing with one key (each call makes its own `EVP_MD_CTX`).
public final class RSAPrivateKey: Sendable {
    let key: EVPKey

    init(key: EVPKey) { self.key = key }

    /// A fresh key of `bits` bits with e = 65537.
    public static func generate(bits: Int = 2048) throws(CryptoError) -> RSAPrivateKey {
        RSAPrivateKey(key: try EVPKey.generate("RSA") { EVP_PKEY_CTX_set_rsa_keygen_bits($0, Int32(bits)) })
    }

    /// From a PEM private key (PKCS#8 `PRIVATE KEY` or traditional `RSA PRIVATE KEY`).
    public convenience init(pem: String) throws(CryptoError) {
        let key = try EVPKey.privateKey(pem: pem)
        guard EVP_PKEY_get_base_id(key.pointer) == EVP_PKEY_RSA else { throw .invalidKey("not an RSA key") }
        self.init(key: key)
    }

    /// The key as unencrypted PKCS#8 PEM.
    public var pem: String { get throws(CryptoError) { try key.privatePEM } }
    /// The same as `pem` (PKCS#8).
    public var pemString: String { get throws(CryptoError) { try key.privatePEM } }

    /// The public half. It shares this key's `EVP_PKEY` (reference-counted through the one
    /// `EVPKey` owner); verification never touches the private part.
    public var publicKey: RSAPublicKey { RSAPublicKey(key: key) }

    /// RSASSA-PKCS1-v1_5 with SHA-256 (RS256).
    public func signPKCS1SHA256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] { try key.sign(message, digest: EVP_sha256()) }
    /// RSASSA-PKCS1-v1_5 with SHA-384 (RS384).
    public func signPKCS1SHA384(_ message: [UInt8]) throws(CryptoError) -> [UInt8] { try key.sign(message, digest: EVP_sha384()) }
}
