import Cryptography

/// Encrypts secrets for one table column and row: the associated data names both, so a
/// ciphertext copied to another row or column does not open.
///
/// It seals with `key` only. It opens with `key`, or else with one of `fallbacks`: earlier
/// keys kept while `BFF_TOKEN_KEY` is rotated (AES-GCM's tag tells a wrong key, so no key
/// id is stored). What a fallback opened is sealed again with `key` at its next write.
struct TokenCipher: Sendable {
    let key: AESGCMKey
    let fallbacks: [AESGCMKey]

    init(key: AESGCMKey, fallbacks: [AESGCMKey] = []) {
        self.key = key
        self.fallbacks = fallbacks
    }

    func seal(_ plaintext: String, table: String, column: String, row: String) throws -> [UInt8] {
        try AESGCM.seal(Array(plaintext.utf8), key: key, associatedData: TokenCipher.context(table, column, row))
    }

    /// The plaintext; throws `key`'s error when no key opens `sealed`.
    func open(_ sealed: [UInt8], table: String, column: String, row: String) throws -> String {
        let context = TokenCipher.context(table, column, row)
        do {
            return String(decoding: try AESGCM.open(sealed, key: key, associatedData: context), as: UTF8.self)
        } catch {
            for fallback in fallbacks {
                if let bytes = try? AESGCM.open(sealed, key: fallback, associatedData: context) { return String(decoding: bytes, as: UTF8.self) }
            }
            throw error
        }
    }

    static func context(_ table: String, _ column: String, _ row: String) -> [UInt8] {
        Array("smart-bff/v1|\(table).\(column)|\(row)".utf8)
    }
}
