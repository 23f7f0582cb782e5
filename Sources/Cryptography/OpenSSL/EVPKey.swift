internal import COpenSSL

/// Owns one `EVP_PKEY*` and frees it in `deinit`. Immutable after creation, and OpenSSL
/// allows concurrent use of a key for signing and verification, hence `@unchecked Sendable`.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes ownership of `pointer`.
    init(takingOwnershipOf pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    /// Size in bits of the key (the RSA modulus, the EC group order).
    var bits: Int { Int(EVP_PKEY_get_bits(pointer)) }
    /// An EC key's curve as OpenSSL names it (`secp384r1` for P-384); nil for other keys.
    var curveName: String? {
        var name = [CChar](repeating: 0, count: 80)
        var length = 0
        guard EVP_PKEY_get_group_name(pointer, &name, name.count, &length) == 1, length < name.count else { return nil }
        return String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// An EC key on P-384: the curve by name, for a key of 384 bits may be on another curve
    /// (brainpoolP384r1), whose JWK could not say "P-384".
    var isP384: Bool { EVP_PKEY_get_base_id(pointer) == EVP_PKEY_EC && curveName == "secp384r1" }

    /// Largest signature in bytes.
    var signatureSize: Int { Int(EVP_PKEY_get_size(pointer)) }

    /// Reads a PEM private key (PKCS#8 or traditional). An encrypted key is refused: with no
    /// pass-phrase callback OpenSSL would prompt on the terminal, or read standard input.
    static func privateKey(pem: String) throws(CryptoError) -> EVPKey {
        try withMemoryBIO(pem) { bio throws(CryptoError) in
            let noPassPhrase: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = { _, _, _, _ in 0 }
            guard let key = PEM_read_bio_PrivateKey(bio, nil, noPassPhrase, nil) else { throw .invalidKey("not a PEM private key") }
            return EVPKey(takingOwnershipOf: key)
        }
    }

    /// Reads a PEM public key (SubjectPublicKeyInfo).
    static func publicKey(pem: String) throws(CryptoError) -> EVPKey {
        try withMemoryBIO(pem) { bio throws(CryptoError) in
            guard let key = PEM_read_bio_PUBKEY(bio, nil, nil, nil) else { throw .invalidKey("not a PEM public key") }
            return EVPKey(takingOwnershipOf: key)
        }
    }

    /// Generates a key with `configure` setting the algorithm's parameters.
    static func generate(_ algorithm: String, configure: (OpaquePointer) -> Int32) throws(CryptoError) -> EVPKey {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1, configure(ctx) > 0 else { throw .openSSL("EVP_PKEY_keygen_init") }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(ctx, &key) == 1, let key else { throw .openSSL("EVP_PKEY_generate") }
        return EVPKey(takingOwnershipOf: key)
    }

    /// The private key as PKCS#8 PEM.
    var privatePEM: String {
        get throws(CryptoError) {
            try writePEM { bio in PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil) }
        }
    }

    /// The public key as SubjectPublicKeyInfo PEM.
    var publicPEM: String {
        get throws(CryptoError) {
            try writePEM { bio in PEM_write_bio_PUBKEY(bio, pointer) }
        }
    }

    /// A big-number parameter (`n`, `e`) as unsigned big-endian bytes.
    func bigNumber(_ name: String) -> [UInt8]? {
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pointer, name, &bn) == 1, let bn else { return nil }
        defer { BN_free(bn) }
        var out = [UInt8](repeating: 0, count: Int((BN_num_bits(bn) + 7) / 8))
        _ = BN_bn2bin(bn, &out)
        return out
    }

    /// An octet-string parameter (the EC public point `pub`).
    func octets(_ name: String) -> [UInt8]? {
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pointer, name, nil, 0, &length) == 1 else { return nil }
        var out = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_get_octet_string_param(pointer, name, &out, length, &length) == 1 else { return nil }
        return Array(out[0..<length])
    }

    /// Signs `message` with `digest` (one-shot EVP_DigestSign).
    func sign(_ message: [UInt8], digest: OpaquePointer) throws(CryptoError) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw .openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, digest, nil, pointer) == 1 else { throw .openSSL("EVP_DigestSignInit") }
        var length = 0
        guard EVP_DigestSign(ctx, nil, &length, message, message.count) == 1 else { throw .openSSL("EVP_DigestSign") }
        var out = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(ctx, &out, &length, message, message.count) == 1 else { throw .openSSL("EVP_DigestSign") }
        return Array(out[0..<length])
    }

    /// Verifies `signature` over `message` with `digest`.
    func verify(_ signature: [UInt8], _ message: [UInt8], digest: OpaquePointer) -> Bool {
        let digest = FetchedDigests.prefetched(digest)
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, digest, nil, pointer) == 1 else { _ = OpenSSLErrorQueue.drain(); return false }
        let ok = EVP_DigestVerify(ctx, signature, signature.count, message, message.count) == 1
        _ = OpenSSLErrorQueue.drain()
        return ok
    }

    private static func withMemoryBIO<T>(_ text: String, _ body: (OpaquePointer) throws(CryptoError) -> T) throws(CryptoError) -> T {
        let bytes = Array(text.utf8)
        guard let bio = bytes.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else { throw .openSSL("BIO_new_mem_buf") }
        defer { BIO_free(bio) }
        // BIO_new_mem_buf reads from `bytes` lazily; keep it alive for the whole body.
        return try withExtendedLifetime(bytes) { () throws(CryptoError) -> T in try body(bio) }
    }

    private func writePEM(_ write: (OpaquePointer) -> Int32) throws(CryptoError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL("BIO_new") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw .openSSL("PEM_write_bio") }
        var data: UnsafeMutablePointer<CChar>?
        let length = bff_bio_get_mem_data(bio, &data)
        guard let data, length > 0 else { throw .openSSL("BIO_get_mem_data") }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }
}
