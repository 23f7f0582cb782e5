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
/// `maxConcurrentLookups` at once (more wait their turn), and its answer goes to callbacks.
/// Lookups of one name in flight at once are one lookup (a name whose DNS hangs holds one
/// thread, not all), and answers are kept `cacheSeconds` (as libcurl did, for 60 s), so an
/// upstream that closes every connection does not cost a lookup per request.
final class Resolver: Sendable {
    typealias Completion = @Sendable (Result<[SocketAddress], HTTPClientError>) -> Void

    /// Sixteen: one EHR's discovery names at most a few hosts (token, JWKS, OpenID issuer),
    /// so an EHR whose names resolve slowly (a lookup keeps its thread until DNS gives up,
    /// past the request's connect timeout) cannot hold every thread and stall the others'.
    static let maxConcurrentLookups = 16
    static let cacheSeconds: UInt64 = 30
    /// Beyond this many names the cache starts over (a bound, not an expected size).
    static let maxCachedNames = 1024

    private struct Lookup: Sendable {
        let key: String
        let host: String
        let port: Int
    }

    private struct State {
        var running = 0
        var queued: [Lookup] = []
        /// The callbacks of each lookup in flight (queued or running), by host and port.
        var waiting: [String: [Completion]] = [:]
        var cache: [String: (addresses: [SocketAddress], expires: UInt64)] = [:]
    }

    private let state = Mutex(State())

    /// Looks `host` up (A and AAAA records, in the system's preferred order) and calls `done`
    /// with the addresses: at once from the cache, or later on the lookup's thread.
    func resolve(_ host: String, port: Int, then done: @escaping Completion) {
        enum Next { case cached([SocketAddress]), wait, run(Lookup) }
        let key = "\(host):\(port)"
        let now = monotonicNanoseconds()
        let next: Next = state.withLock { s in
            if let hit = s.cache[key], hit.expires > now { return .cached(hit.addresses) }
            guard s.waiting[key] == nil else {
                s.waiting[key]!.append(done)
                return .wait
            }
            s.waiting[key] = [done]
            let lookup = Lookup(key: key, host: host, port: port)
            guard s.running < Resolver.maxConcurrentLookups else {
                s.queued.append(lookup)
                return .wait
            }
            s.running += 1
            return .run(lookup)
        }
        switch next {
        case let .cached(addresses): done(.success(addresses))
        case .wait: break
        case let .run(lookup): Thread.detachNewThread { [self] in run(lookup) }
        }
    }

    /// Answers lookups of `host` and `port` with `addresses` for `cacheSeconds`, as if DNS
    /// had: for tests of names with several addresses.
    func remember(_ addresses: [SocketAddress], forHost host: String, port: Int) {
        let expires = monotonicNanoseconds() + Resolver.cacheSeconds * 1_000_000_000
        state.withLock { $0.cache["\(host):\(port)"] = (addresses, expires) }
    }

    /// Runs `lookup`, then whatever queued meanwhile, on this thread.
    private func run(_ first: Lookup) {
        var next: Lookup? = first
        while let lookup = next {
            let result = Resolver.addresses(of: lookup.host, port: lookup.port)
            let expires = monotonicNanoseconds() + Resolver.cacheSeconds * 1_000_000_000
            let callbacks: [Completion]
            (callbacks, next) = state.withLock { s in
                if case let .success(addresses) = result {
                    if s.cache.count >= Resolver.maxCachedNames { s.cache.removeAll() }
                    s.cache[lookup.key] = (addresses, expires)
                }
                let callbacks = s.waiting.removeValue(forKey: lookup.key) ?? []
                guard !s.queued.isEmpty else {
                    s.running -= 1
                    return (callbacks, nil)
                }
                return (callbacks, s.queued.removeFirst())
            }
            for done in callbacks { done(result) }
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
