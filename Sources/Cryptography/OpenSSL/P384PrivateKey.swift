internal import COpenSSL

/// An EC P-384 private key (ES384 `private_key_jwt` client assertions).
///
/// `Sendable`: immutable once made; its one `EVPKey` owns the `EVP_PKEY*`, and OpenSSL
/// allows concurrent signing with one key.
public final class P384PrivateKey: Sendable {
    let key: EVPKey

    init(key: EVPKey) { self.key = key }

    /// A fresh P-384 key.
    public static func generate() throws(CryptoError) -> P384PrivateKey {
        P384PrivateKey(key: try EVPKey.generate("EC") { EVP_PKEY_CTX_set_group_name($0, "P-384") })
    }

    /// From a PEM private key (PKCS#8 or `EC PRIVATE KEY`) on P-384.
    public convenience init(pem: String) throws(CryptoError) {
        let key = try EVPKey.privateKey(pem: pem)
        guard key.isP384 else { throw .invalidKey("not a P-384 key") }
        self.init(key: key)
    }

    /// The key as unencrypted PKCS#8 PEM.
    public var pem: String { get throws(CryptoError) { try key.privatePEM } }
    /// The same as `pem` (PKCS#8).
    public var pemString: String { get throws(CryptoError) { try key.privatePEM } }
    /// The public half (shares this key's `EVP_PKEY` through the one `EVPKey` owner).
    public var publicKey: P384PublicKey { P384PublicKey(key: key) }

    /// Signs with ECDSA P-384 / SHA-384; returns the JWS form (raw r ‖ s, 96 bytes),
    /// converted from OpenSSL's DER.
    public func signES384(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let der = try key.sign(message, digest: EVP_sha384())
        guard let raw = ECDSASignature.raw(fromDER: der, width: 48) else { throw .openSSL("d2i_ECDSA_SIG") }
        return raw
    }
}
