#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call, with `errno` and its text.
public struct SocketError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let errno: Int32

    /// Captures the current `errno` right after a failed `call`.
    static func makeFailed(_ call: String) -> SocketError {
        SocketError(call: call, errno: Glibc.errno)
    }

    public var description: String { "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))" }
}
