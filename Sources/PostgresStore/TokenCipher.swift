import Cryptography

/// Encrypts secrets for one table column and row: the associated data names both, so a
/// ciphertext copied to another row or column does not open.
struct TokenCipher: Sendable {
    let key: AESGCMKey

    func seal(_ plaintext: String, table: String, column: String, row: String) throws -> [UInt8] {
        try AESGCM.seal(Array(plaintext.utf8), key: key, associatedData: TokenCipher.context(table, column, row))
    }

    func open(_ sealed: [UInt8], table: String, column: String, row: String) throws -> String {
        let bytes = try AESGCM.open(sealed, key: key, associatedData: TokenCipher.context(table, column, row))
        return String(decoding: bytes, as: UTF8.self)
    }

    static func context(_ table: String, _ column: String, _ row: String) -> [UInt8] {
        Array("smart-bff/v1|\(table).\(column)|\(row)".utf8)
    }
}
