internal import COpenSSL

/// An RSA public key for verifying signatures.
public final class RSAPublicKey: Sendable {
    let key: EVPKey

    init(key: EVPKey) { self.key = key }

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
        signature.count == key.signatureSize && key.verify(signature, message, digest: EVP_sha256())
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
