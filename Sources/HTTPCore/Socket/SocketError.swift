#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call, with `errno` and its text (or, for `getaddrinfo`, its own error
/// code and `gai_strerror`'s text).
public struct SocketError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let errno: Int32
    /// `errno` is a `getaddrinfo` error code (`EAI_…`), not an errno value.
    var isLookupError = false

    /// Captures the current `errno` right after a failed `call`.
    static func makeFailed(_ call: String) -> SocketError {
        SocketError(call: call, errno: Glibc.errno)
    }

    /// `getaddrinfo` for `host` failed with `code` (`EAI_NONAME`, …).
    static func lookupFailed(_ host: String, code: Int32) -> SocketError {
        SocketError(call: "getaddrinfo(\(host))", errno: code, isLookupError: true)
    }

    public var description: String {
        isLookupError ? "\(call) failed: \(String(cString: gai_strerror(errno)))"
                      : "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }
}
