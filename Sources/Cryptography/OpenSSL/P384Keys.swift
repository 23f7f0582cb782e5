internal import COpenSSL

/// An EC P-384 public key (ES384 client assertions).
public final class P384PublicKey: Sendable {
    let key: EVPKey

    init(key: EVPKey) { self.key = key }

    public convenience init(pem: String) throws(CryptoError) {
        let key = try EVPKey.publicKey(pem: pem)
        guard EVP_PKEY_get_base_id(key.pointer) == EVP_PKEY_EC, key.bits == 384 else { throw .invalidKey("not a P-384 key") }
        self.init(key: key)
    }

    /// The affine coordinates (48 bytes each), for a JWK.
    public var coordinates: (x: [UInt8], y: [UInt8]) {
        let point = key.octets("pub") ?? []
        guard point.count == 97, point[0] == 4 else { return ([], []) }
        return (Array(point[1...48]), Array(point[49...96]))
    }

    public var pem: String { get throws(CryptoError) { try key.publicPEM } }

    /// Verifies a JWS ES384 signature (raw r ‖ s, 96 bytes).
    public func verifyES384(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == 96, let der = ECDSASignature.der(fromRaw: signature, width: 48) else { return false }
        return key.verify(der, message, digest: EVP_sha384())
    }
}

/// An EC P-384 private key.
public final class P384PrivateKey: Sendable {
    let key: EVPKey

    init(key: EVPKey) { self.key = key }

    public static func generate() throws(CryptoError) -> P384PrivateKey {
        P384PrivateKey(key: try EVPKey.generate("EC") { EVP_PKEY_CTX_set_group_name($0, "P-384") })
    }

    public convenience init(pem: String) throws(CryptoError) {
        let key = try EVPKey.privateKey(pem: pem)
        guard EVP_PKEY_get_base_id(key.pointer) == EVP_PKEY_EC, key.bits == 384 else { throw .invalidKey("not a P-384 key") }
        self.init(key: key)
    }

    public var pem: String { get throws(CryptoError) { try key.privatePEM } }
    public var publicKey: P384PublicKey { P384PublicKey(key: key) }

    /// Signs with ECDSA P-384 / SHA-384; returns JWS form (raw r ‖ s, 96 bytes).
    public func signES384(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let der = try key.sign(message, digest: EVP_sha384())
        guard let raw = ECDSASignature.raw(fromDER: der, width: 48) else { throw .openSSL("d2i_ECDSA_SIG") }
        return raw
    }
}

/// Converts ECDSA signatures between DER (OpenSSL) and raw r ‖ s (JWS, RFC 7518 §3.4).
enum ECDSASignature {
    static func raw(fromDER der: [UInt8], width: Int) -> [UInt8]? {
        var pointer: UnsafePointer<UInt8>? = nil
        return der.withUnsafeBufferPointer { buffer -> [UInt8]? in
            pointer = buffer.baseAddress
            guard let sig = d2i_ECDSA_SIG(nil, &pointer, buffer.count) else { return nil }
            defer { ECDSA_SIG_free(sig) }
            var r: OpaquePointer?, s: OpaquePointer?
            ECDSA_SIG_get0(sig, &r, &s)
            var out = [UInt8](repeating: 0, count: width * 2)
            guard let r, let s,
                  out.withUnsafeMutableBufferPointer({ BN_bn2binpad(r, $0.baseAddress, Int32(width)) }) == width,
                  out.withUnsafeMutableBufferPointer({ BN_bn2binpad(s, $0.baseAddress! + width, Int32(width)) }) == width
            else { return nil }
            return out
        }
    }

    static func der(fromRaw raw: [UInt8], width: Int) -> [UInt8]? {
        guard raw.count == width * 2, let sig = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(sig) }
        guard let r = BN_bin2bn(raw, Int32(width), nil) else { return nil }
        guard let s = raw.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress! + width, Int32(width), nil) }) else {
            BN_free(r)
            return nil
        }
        // ECDSA_SIG_set0 takes ownership of r and s.
        guard ECDSA_SIG_set0(sig, r, s) == 1 else { BN_free(r); BN_free(s); return nil }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(sig, &out)
        guard length > 0, let out else { return nil }
        defer { bff_openssl_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
