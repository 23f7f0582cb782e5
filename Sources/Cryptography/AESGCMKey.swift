import Foundation

/// A 256-bit AES key (`BFF_TOKEN_KEY`). Prints redacted.
public struct AESGCMKey: Sendable, CustomStringConvertible {
    let bytes: [UInt8]

    /// Exactly 32 bytes; anything else throws `invalidKey`.
    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == 32 else { throw .invalidKey("an AES-256 key is 32 bytes") }
        self.bytes = bytes
    }

    /// Standard base64 (with padding) of 32 bytes, as `BFF_TOKEN_KEY` holds it.
    public init(base64: String) throws(CryptoError) {
        guard let data = Data(base64Encoded: base64) else { throw .invalidKey("not base64") }
        try self.init(bytes: Array(data))
    }

    public var description: String { "AESGCMKey(<redacted>)" }
}
