internal import COpenSSL

/// AES-GCM through OpenSSL's EVP interface: AES-256 with random 96-bit nonces for tokens at
/// rest, and a low-level form (any key size, any IV) for test vectors.
public enum AESGCM {
    /// Bytes of nonce that `seal` puts in front of the ciphertext.
    public static let nonceSize = 12
    /// Bytes of tag that `seal` puts after the ciphertext.
    public static let tagSize = 16

    /// Encrypts with a fresh random 96-bit nonce. Returns nonce ‖ ciphertext ‖ tag.
    /// `associatedData` binds the ciphertext to its context (e.g. table, column and row):
    /// opening with other associated data fails.
    public static func seal(_ plaintext: [UInt8], key: AESGCMKey, associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        let nonce = SecureRandom.bytes(nonceSize)
        let (ciphertext, tag) = try seal(plaintext, key: key.bytes, iv: nonce, associatedData: associatedData)
        return nonce + ciphertext + tag
    }

    /// Decrypts what `seal` produced; fails if anything was changed or the associated data differs.
    public static func open(_ sealed: [UInt8], key: AESGCMKey, associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard sealed.count >= nonceSize + tagSize else { throw .authenticationFailed }
        let nonce = Array(sealed[0..<nonceSize])
        let ciphertext = Array(sealed[nonceSize..<(sealed.count - tagSize)])
        let tag = Array(sealed[(sealed.count - tagSize)...])
        return try open(ciphertext: ciphertext, tag: tag, key: key.bytes, iv: nonce, associatedData: associatedData)
    }

    /// Low-level seal with a caller's IV (for test vectors); AES-128/192/256 by key length.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], iv: [UInt8], associatedData: [UInt8])
        throws(CryptoError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        let cipher = try cipherFor(key)
        guard !iv.isEmpty else { throw .invalidInput("empty IV") }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw .openSSL("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        guard EVP_EncryptInit_ex(ctx, cipher, nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(iv.count), nil) == 1,
              EVP_EncryptInit_ex(ctx, nil, nil, key, iv) == 1 else { throw .openSSL("EVP_EncryptInit_ex") }
        var length: Int32 = 0
        if !associatedData.isEmpty {
            guard EVP_EncryptUpdate(ctx, nil, &length, associatedData, Int32(associatedData.count)) == 1 else {
                throw .openSSL("EVP_EncryptUpdate(aad)")
            }
        }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var total: Int32 = 0
        if !plaintext.isEmpty {
            guard EVP_EncryptUpdate(ctx, &out, &length, plaintext, Int32(plaintext.count)) == 1 else { throw .openSSL("EVP_EncryptUpdate") }
            total = length
        }
        let finalOK = out.withUnsafeMutableBufferPointer { EVP_EncryptFinal_ex(ctx, $0.baseAddress! + Int(total), &length) }
        guard finalOK == 1 else { throw .openSSL("EVP_EncryptFinal_ex") }
        total += length
        var tag = [UInt8](repeating: 0, count: tagSize)
        guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagSize), &tag) == 1 else { throw .openSSL("EVP_CTRL_GCM_GET_TAG") }
        return (Array(out[0..<Int(total)]), tag)
    }

    /// Low-level open (for test vectors). Any tag length 1...16 is checked as given.
    public static func open(ciphertext: [UInt8], tag: [UInt8], key: [UInt8], iv: [UInt8], associatedData: [UInt8])
        throws(CryptoError) -> [UInt8] {
        let cipher = try cipherFor(key)
        guard !iv.isEmpty, !tag.isEmpty, tag.count <= 16 else { throw .authenticationFailed }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw .openSSL("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        guard EVP_DecryptInit_ex(ctx, cipher, nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(iv.count), nil) == 1,
              EVP_DecryptInit_ex(ctx, nil, nil, key, iv) == 1 else { throw .openSSL("EVP_DecryptInit_ex") }
        var length: Int32 = 0
        if !associatedData.isEmpty {
            guard EVP_DecryptUpdate(ctx, nil, &length, associatedData, Int32(associatedData.count)) == 1 else {
                throw .openSSL("EVP_DecryptUpdate(aad)")
            }
        }
        var out = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var total: Int32 = 0
        if !ciphertext.isEmpty {
            guard EVP_DecryptUpdate(ctx, &out, &length, ciphertext, Int32(ciphertext.count)) == 1 else { throw .openSSL("EVP_DecryptUpdate") }
            total = length
        }
        var tagCopy = tag
        guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tag.count), &tagCopy) == 1 else { throw .openSSL("EVP_CTRL_GCM_SET_TAG") }
        let finalOK = out.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(ctx, $0.baseAddress! + Int(total), &length) }
        guard finalOK == 1 else { throw .authenticationFailed }
        total += length
        return Array(out[0..<Int(total)])
    }

    private static func cipherFor(_ key: [UInt8]) throws(CryptoError) -> OpaquePointer {
        switch key.count {
        case 16: return EVP_aes_128_gcm()
        case 24: return EVP_aes_192_gcm()
        case 32: return EVP_aes_256_gcm()
        default: throw .invalidKey("AES keys are 16, 24 or 32 bytes")
        }
    }
}
