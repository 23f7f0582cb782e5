#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// An address to connect to: a `sockaddr_in` or `sockaddr_in6`, as bytes.
struct SocketAddress: Sendable {
    let family: Int32
    let bytes: [UInt8]

    /// The address of a numeric `host` (dotted IPv4, or IPv6 without brackets), or nil.
    static func numeric(_ host: String, port: Int) -> SocketAddress? {
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = UInt16(port).bigEndian
            return SocketAddress(family: AF_INET, bytes: withUnsafeBytes(of: v4) { Array($0) })
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = UInt16(port).bigEndian
            return SocketAddress(family: AF_INET6, bytes: withUnsafeBytes(of: v6) { Array($0) })
        }
        return nil
    }

    /// Calls `body` with the address as a `sockaddr` pointer and its length.
    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        bytes.withUnsafeBytes { raw in body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count)) }
    }
}

/// Resolves host names off the event loops: `getaddrinfo` blocks (for as long as DNS takes
/// to answer or give up), so each lookup runs on a thread of its own, at most
/// `maxConcurrentLookups` at once (more wait their turn), and its answer goes to a callback.
/// Connections are pooled, so lookups are rare: one per new connection to a named host.
final class Resolver: Sendable {
    typealias Completion = @Sendable (Result<[SocketAddress], HTTPClientError>) -> Void

    static let maxConcurrentLookups = 4

    private struct Lookup: Sendable {
        let host: String
        let port: Int
        let done: Completion
    }

    private struct State {
        var running = 0
        var queued: [Lookup] = []
    }

    private let state = Mutex(State())

    /// Looks `host` up (A and AAAA records, in the system's preferred order) and calls `done`
    /// with the addresses on the lookup's thread.
    func resolve(_ host: String, port: Int, then done: @escaping Completion) {
        let lookup = Lookup(host: host, port: port, done: done)
        let startNow = state.withLock { s in
            guard s.running < Resolver.maxConcurrentLookups else {
                s.queued.append(lookup)
                return false
            }
            s.running += 1
            return true
        }
        if startNow { Thread.detachNewThread { [self] in run(lookup) } }
    }

    /// Runs `lookup`, then whatever queued meanwhile, on this thread.
    private func run(_ first: Lookup) {
        var next: Lookup? = first
        while let lookup = next {
            lookup.done(Resolver.addresses(of: lookup.host, port: lookup.port))
            next = state.withLock { s in
                guard !s.queued.isEmpty else {
                    s.running -= 1
                    return nil
                }
                return s.queued.removeFirst()
            }
        }
    }

    private static func addresses(of host: String, port: Int) -> Result<[SocketAddress], HTTPClientError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let code = getaddrinfo(host, String(port), &hints, &list)
        guard code == 0, let list else {
            return .failure(.connectFailed("could not resolve host \(host): \(String(cString: gai_strerror(code)))"))
        }
        defer { freeaddrinfo(list) }
        var found: [SocketAddress] = []
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            let info = current.pointee
            if let address = info.ai_addr, info.ai_family == AF_INET || info.ai_family == AF_INET6 {
                let bytes = Array(UnsafeRawBufferPointer(start: address, count: Int(info.ai_addrlen)))
                found.append(SocketAddress(family: info.ai_family, bytes: bytes))
            }
            entry = info.ai_next
        }
        return found.isEmpty ? .failure(.connectFailed("host \(host) has no IPv4 or IPv6 address")) : .success(found)
    }
}
