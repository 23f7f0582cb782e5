internal import COpenSSL

/// An RSA public key for verifying RSASSA-PKCS1-v1_5 signatures (RS256, RS384).
///
/// `Sendable`: the key is immutable once made. Its `EVP_PKEY*` is owned by one `EVPKey`
/// (freed in its `deinit`), which OpenSSL allows several threads to use at once for
/// verification; the per-call contexts come from a locked pool.
public final class RSAPublicKey: Sendable {
    let key: EVPKey
    /// Verification contexts set up for PKCS#1 v1.5 / SHA-256, reused across calls (setting
    /// one up costs more than the verification itself in OpenSSL 3).
    private let contexts: RSAVerifyContextPool

    init(key: EVPKey) {
        self.key = key
        self.contexts = RSAVerifyContextPool(key: key)
    }

    /// From the JWK members `n` and `e` (unsigned big-endian), through
    /// `OSSL_PARAM_BLD` and `EVP_PKEY_fromdata`. No size or exponent policy is applied here.
    public convenience init(modulus: [UInt8], exponent: [UInt8]) throws(CryptoError) {
        guard !modulus.isEmpty, !exponent.isEmpty else { throw .invalidKey("empty RSA modulus or exponent") }
        guard let builder = OSSL_PARAM_BLD_new() else { throw .openSSL("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard let n = BN_bin2bn(modulus, Int32(modulus.count), nil) else { throw .openSSL("BN_bin2bn") }
        defer { BN_free(n) }
        guard let e = BN_bin2bn(exponent, Int32(exponent.count), nil) else { throw .openSSL("BN_bin2bn") }
        defer { BN_free(e) }
        // The builder keeps pointers to n and e (not copies) until OSSL_PARAM_BLD_to_param.
        guard OSSL_PARAM_BLD_push_BN(builder, bff_param_rsa_n, n) == 1, OSSL_PARAM_BLD_push_BN(builder, bff_param_rsa_e, e) == 1
        else { throw .openSSL("OSSL_PARAM_BLD_push_BN") }
        guard let params = OSSL_PARAM_BLD_to_param(builder) else { throw .openSSL("OSSL_PARAM_BLD_to_param") }
        defer { OSSL_PARAM_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_fromdata_init(ctx) == 1, EVP_PKEY_fromdata(ctx, &pkey, bff_evp_pkey_public_key, params) == 1, let pkey else {
            throw .invalidKey("unusable RSA public key")
        }
        self.init(key: EVPKey(takingOwnershipOf: pkey))
    }

    /// From a PEM SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`).
    public convenience init(pem: String) throws(CryptoError) {
        let key = try EVPKey.publicKey(pem: pem)
        guard EVP_PKEY_get_base_id(key.pointer) == EVP_PKEY_RSA else { throw .invalidKey("not an RSA key") }
        self.init(key: key)
    }

    /// The size of the modulus in bits.
    public var modulusBits: Int { key.bits }
    /// The modulus `n`, unsigned big-endian without leading zeros (the JWK `n`).
    public var modulus: [UInt8] { key.bigNumber("n") ?? [] }
    /// The public exponent `e`, unsigned big-endian without leading zeros (the JWK `e`).
    public var exponent: [UInt8] { key.bigNumber("e") ?? [] }
    /// The key as PEM SubjectPublicKeyInfo.
    public var pem: String { get throws(CryptoError) { try key.publicPEM } }

    /// RSASSA-PKCS1-v1_5 with SHA-256 (RS256). A signature whose length is not the modulus
    /// length is refused before OpenSSL sees it.
    public func verifyPKCS1SHA256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == key.signatureSize else { return false }
        return contexts.verify(signature: signature, digest: SHA256.hash(message))
    }

    /// RSASSA-PKCS1-v1_5 with SHA-384 (RS384), with the same length rule.
    public func verifyPKCS1SHA384(signature: [UInt8], message: [UInt8]) -> Bool {
        signature.count == key.signatureSize && key.verify(signature, message, digest: EVP_sha384())
    }
}
