internal import COpenSSL

/// An EC P-384 public key (ES384: `private_key_jwt` client assertions, their JWKS).
///
/// `Sendable`: immutable once made; its one `EVPKey` owns the `EVP_PKEY*`.
public final class P384PublicKey: Sendable {
    let key: EVPKey

    init(key: EVPKey) { self.key = key }

    /// From a PEM SubjectPublicKeyInfo holding a P-384 key.
    public convenience init(pem: String) throws(CryptoError) {
        let key = try EVPKey.publicKey(pem: pem)
        guard key.isP384 else { throw .invalidKey("not a P-384 key") }
        self.init(key: key)
    }

    /// The affine coordinates (48 bytes each, big-endian, zero-padded), for a JWK.
    public var coordinates: (x: [UInt8], y: [UInt8]) {
        let point = key.octets("pub") ?? []
        guard point.count == 97, point[0] == 4 else { return ([], []) }
        return (Array(point[1...48]), Array(point[49...96]))
    }

    /// The JWK `x` coordinate (48 bytes).
    public var x: [UInt8] { coordinates.x }
    /// The JWK `y` coordinate (48 bytes).
    public var y: [UInt8] { coordinates.y }

    /// The key as PEM SubjectPublicKeyInfo.
    public var pem: String { get throws(CryptoError) { try key.publicPEM } }

    /// Verifies a JWS ES384 signature (raw r ‖ s, 96 bytes; RFC 7518 §3.4). Any other
    /// length, DER included, is refused.
    public func verifyES384(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == 96, let der = ECDSASignature.der(fromRaw: signature, width: 48) else { return false }
        return key.verify(der, message, digest: EVP_sha384())
    }
}
