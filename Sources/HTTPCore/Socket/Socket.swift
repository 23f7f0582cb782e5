#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Thin wrappers over the POSIX socket calls the server uses. Nothing else in HTTPCore
/// touches file descriptors directly.
enum Socket {
    /// Opens a non-blocking TCP listener on `host:port` (port 0 picks a free one) and returns
    /// the descriptor and the bound port.
    static func makeListener(host: String, port: Int, backlog: Int32 = 4096) throws(SocketError) -> (fd: Int32, port: Int) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var info: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &info)
        guard rc == 0, let first = info else { throw SocketError.lookupFailed(host, code: rc) }
        defer { freeaddrinfo(first) }

        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .makeFailed("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            let error = SocketError.makeFailed("bind(\(host):\(port))")
            close(fd)
            throw error
        }
        guard listen(fd, backlog) == 0 else {
            let error = SocketError.makeFailed("listen")
            close(fd)
            throw error
        }
        return (fd, try boundPort(fd))
    }

    static func boundPort(_ fd: Int32) throws(SocketError) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0 else { throw .makeFailed("getsockname") }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) } }
        case AF_INET6:
            return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) } }
        default:
            return 0
        }
    }

    /// What accepting a connection came to.
    enum Accepted {
        case connection(Int32)
        /// None is waiting (or the listener failed otherwise).
        case none
        /// The process (EMFILE) or the system (ENFILE) has no descriptor left, or the kernel
        /// no memory for one: connections wait in the backlog, and the listener stays readable.
        case outOfDescriptors(errno: Int32)
    }

    /// Accepts one connection without blocking.
    static func accept(_ listener: Int32) -> Accepted {
        while true {
            let fd = bff_accept4(listener, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            if fd >= 0 {
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return .connection(fd)
            }
            switch errno {
            case EINTR, ECONNABORTED: continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM: return .outOfDescriptors(errno: errno)
            default: return .none
            }
        }
    }

    /// What a non-blocking read or write did.
    enum IOResult {
        case bytes(Int)
        case wouldBlock
        case closed
    }

    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n > 0 { return .bytes(n) }
            if n == 0 { return .closed }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock : .closed
        }
    }

    static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> IOResult {
        while true {
            let n = send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL))
            if n >= 0 { return .bytes(n) }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock : .closed
        }
    }

    /// Best-effort write of `bytes`, then close: for refusals that keep no state.
    static func writeAndClose(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { _ = write(fd, $0) }
        shutdown(fd, Int32(SHUT_WR))
        close(fd)
    }

    /// The peer's address as text, for logs.
    static func peerAddress(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard rc == 0 else { return "" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let ok = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
            }
        }
        return ok == 0 ? String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    }
}
