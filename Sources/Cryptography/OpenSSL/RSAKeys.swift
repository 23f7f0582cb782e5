internal import COpenSSL
import Foundation

/// An RSA public key for verifying signatures.
public final class RSAPublicKey: Sendable {
    let key: EVPKey
    /// Verification contexts set up for PKCS#1 v1.5 / SHA-256, reused across calls (setting
    /// one up costs more than the verification itself in OpenSSL 3).
    private let contexts: VerifyContextPool

    init(key: EVPKey) {
        self.key = key
        self.contexts = VerifyContextPool(key: key)
    }

    /// From the JWK members `n` and `e` (unsigned big-endian).
    public convenience init(modulus: [UInt8], exponent: [UInt8]) throws(CryptoError) {
        guard !modulus.isEmpty, !exponent.isEmpty else { throw .invalidKey("empty RSA modulus or exponent") }
        guard let builder = OSSL_PARAM_BLD_new() else { throw .openSSL("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard let n = BN_bin2bn(modulus, Int32(modulus.count), nil) else { throw .openSSL("BN_bin2bn") }
        defer { BN_free(n) }
        guard let e = BN_bin2bn(exponent, Int32(exponent.count), nil) else { throw .openSSL("BN_bin2bn") }
        defer { BN_free(e) }
        guard OSSL_PARAM_BLD_push_BN(builder, bff_param_rsa_n, n) == 1, OSSL_PARAM_BLD_push_BN(builder, bff_param_rsa_e, e) == 1,
              let params = OSSL_PARAM_BLD_to_param(builder) else { throw .openSSL("OSSL_PARAM_BLD_to_param") }
        defer { OSSL_PARAM_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_fromdata_init(ctx) == 1, EVP_PKEY_fromdata(ctx, &pkey, bff_evp_pkey_public_key, params) == 1, let pkey else {
            throw .invalidKey("unusable RSA public key")
        }
        self.init(key: EVPKey(takingOwnershipOf: pkey))
    }

    /// From a PEM SubjectPublicKeyInfo.
    public convenience init(pem: String) throws(CryptoError) {
        let key = try EVPKey.publicKey(pem: pem)
        guard EVP_PKEY_get_base_id(key.pointer) == EVP_PKEY_RSA else { throw .invalidKey("not an RSA key") }
        self.init(key: key)
    }

    public var modulusBits: Int { key.bits }
    public var modulus: [UInt8] { key.bigNumber("n") ?? [] }
    public var exponent: [UInt8] { key.bigNumber("e") ?? [] }
    public var pem: String { get throws(CryptoError) { try key.publicPEM } }

    /// RSASSA-PKCS1-v1_5 with SHA-256 (RS256). A signature whose length is not the modulus
    /// length is refused before OpenSSL sees it.
    public func verifyPKCS1SHA256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == key.signatureSize else { return false }
        return contexts.verify(signature: signature, digest: SHA256.hash(message))
    }

    /// RSASSA-PKCS1-v1_5 with SHA-384 (RS384).
    public func verifyPKCS1SHA384(signature: [UInt8], message: [UInt8]) -> Bool {
        signature.count == key.signatureSize && key.verify(signature, message, digest: EVP_sha384())
    }
}

/// An RSA private key for signing (ID tokens in the sandbox, client assertions).
public final class RSAPrivateKey: Sendable {
    let key: EVPKey

    init(key: EVPKey) { self.key = key }

    public static func generate(bits: Int = 2048) throws(CryptoError) -> RSAPrivateKey {
        RSAPrivateKey(key: try EVPKey.generate("RSA") { EVP_PKEY_CTX_set_rsa_keygen_bits($0, Int32(bits)) })
    }

    public convenience init(pem: String) throws(CryptoError) {
        let key = try EVPKey.privateKey(pem: pem)
        guard EVP_PKEY_get_base_id(key.pointer) == EVP_PKEY_RSA else { throw .invalidKey("not an RSA key") }
        self.init(key: key)
    }

    /// PKCS#8 PEM.
    public var pem: String { get throws(CryptoError) { try key.privatePEM } }

    public var publicKey: RSAPublicKey {
        // The public half shares the EVP_PKEY; verification never touches the private part.
        RSAPublicKey(key: key)
    }

    public func signPKCS1SHA256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] { try key.sign(message, digest: EVP_sha256()) }
    public func signPKCS1SHA384(_ message: [UInt8]) throws(CryptoError) -> [UInt8] { try key.sign(message, digest: EVP_sha384()) }
}

/// A few `EVP_PKEY_CTX`s initialised for RSA PKCS#1 v1.5 verification of SHA-256 digests.
/// A context is used by one thread at a time (taken from and returned to the pool under a lock).
final class VerifyContextPool: @unchecked Sendable {
    // @unchecked: `free` is only touched under `lock`; each context is owned by one caller at a time.
    private let key: EVPKey
    private let lock = NSLock()
    private var free: [OpaquePointer] = []

    init(key: EVPKey) { self.key = key }

    deinit { for ctx in free { EVP_PKEY_CTX_free(ctx) } }

    func verify(signature: [UInt8], digest: [UInt8]) -> Bool {
        guard let ctx = take() else { return false }
        let ok = EVP_PKEY_verify(ctx, signature, signature.count, digest, digest.count) == 1
        if !ok { _ = OpenSSLErrorQueue.drain() }
        give(ctx)
        return ok
    }

    private func take() -> OpaquePointer? {
        lock.lock()
        let reused = free.popLast()
        lock.unlock()
        if let reused { return reused }
        guard let ctx = EVP_PKEY_CTX_new(key.pointer, nil) else { return nil }
        guard EVP_PKEY_verify_init(ctx) == 1, EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1,
              let md = FetchedDigests.sha256, EVP_PKEY_CTX_set_signature_md(ctx, md) == 1 else {
            EVP_PKEY_CTX_free(ctx)
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        return ctx
    }

    private func give(_ ctx: OpaquePointer) {
        lock.lock()
        if free.count < 8 { free.append(ctx); lock.unlock() } else { lock.unlock(); EVP_PKEY_CTX_free(ctx) }
    }
}
