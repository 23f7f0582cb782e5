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
    public static func openSSL(_ function: String) -> CryptoError { CryptoError(.openSSL, function, OpenSSLErrorQueue.drain()) }
    /// An AEAD tag or signature did not verify.
    public static var authenticationFailed: CryptoError { CryptoError(.authenticationFailed, "authentication failed", OpenSSLErrorQueue.drain()) }
    /// A key of the wrong size, type or encoding; drains the error queue (a PEM parse leaves errors).
    public static func invalidKey(_ reason: String) -> CryptoError { CryptoError(.invalidKey, reason, OpenSSLErrorQueue.drain()) }
    /// An argument outside what the operation allows (an empty IV).
    public static func invalidInput(_ reason: String) -> CryptoError { CryptoError(.invalidInput, reason) }

    /// Whether a tag or signature failed to verify (as opposed to a key or OpenSSL failure).
    public var isAuthenticationFailure: Bool { code == .authenticationFailed }
    /// Whether a key was unusable.
    public var isInvalidKey: Bool { code == .invalidKey }

    /// Generic: the operation only, never key material.
    public var description: String { "cryptographic operation failed: \(operation)" }
    /// The operation and OpenSSL's error queue, for debug logs.
    public var debugDescription: String { description + (openSSLErrors.isEmpty ? "" : " [" + openSSLErrors.joined(separator: "; ") + "]") }
}
