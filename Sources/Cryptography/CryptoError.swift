/// A failed cryptographic operation. `description` says which operation failed; the
/// OpenSSL error queue, drained when the error was made, is in `debugDescription`.
public struct CryptoError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible, Equatable {
    private enum Code: Sendable, Equatable { case openSSL, authenticationFailed, invalidKey, invalidInput }

    private let code: Code
    /// The operation (an OpenSSL function name or a short reason).
    public let operation: String
    /// OpenSSL's error queue at the time, as text.
    public let openSSLErrors: [String]

    private init(_ code: Code, _ operation: String, _ errors: [String] = []) {
        self.code = code
        self.operation = operation
        self.openSSLErrors = errors
    }

    /// An OpenSSL call failed; drains the thread's error queue into the error.
    static func openSSL(_ function: String) -> CryptoError { CryptoError(.openSSL, function, OpenSSLErrorQueue.drain()) }
    /// An AEAD tag or signature did not verify.
    public static var authenticationFailed: CryptoError { CryptoError(.authenticationFailed, "authentication failed", OpenSSLErrorQueue.drain()) }
    public static func invalidKey(_ reason: String) -> CryptoError { CryptoError(.invalidKey, reason, OpenSSLErrorQueue.drain()) }
    public static func invalidInput(_ reason: String) -> CryptoError { CryptoError(.invalidInput, reason) }

    public var isAuthenticationFailure: Bool { code == .authenticationFailed }

    public var description: String { "cryptographic operation failed: \(operation)" }
    public var debugDescription: String { description + (openSSLErrors.isEmpty ? "" : " [" + openSSLErrors.joined(separator: "; ") + "]") }
}
