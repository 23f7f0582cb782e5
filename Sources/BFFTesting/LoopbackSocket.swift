import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// TCP sockets bound to 127.0.0.1 on an ephemeral port, for the tests' own servers.
public enum LoopbackSocket {
    /// A socket bound to 127.0.0.1 on `port`, or on one the kernel picks (0), and that port.
    /// A given port is bound with `SO_REUSEADDR`, as servers bind theirs: only a socket
    /// bound to it already is in the way, not connections of the past in TIME_WAIT. The
    /// caller owns (and closes) the descriptor.
    public static func bind(port: Int = 0) throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        if port != 0 {
            var on: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            close(fd)
            throw POSIXError(.init(rawValue: code) ?? .EADDRINUSE)
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A listening socket on 127.0.0.1 and its port.
    public static func listen(backlog: Int32) throws -> (fd: Int32, port: Int) {
        let (fd, port) = try bind()
        guard Glibc.listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(.init(rawValue: code) ?? .EADDRINUSE)
        }
        return (fd, port)
    }

    /// A port on 127.0.0.1 that nothing listens on (bound, then closed).
    public static func unusedPort() throws -> Int {
        let (fd, port) = try bind()
        close(fd)
        return port
    }

    /// A socket connected to `port` on 127.0.0.1.
    public static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(.init(rawValue: code) ?? .ECONNREFUSED)
        }
        return fd
    }

    /// Writes all of `bytes` to `fd`; false when the peer has gone.
    public static func sendAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + (offset - bytes.startIndex), bytes.endIndex - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    /// Copies bytes both ways between two sockets until either side closes.
    public static func relay(_ a: Int32, _ b: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
        while true {
            guard poll(&fds, 2, -1) > 0 else { if errno == EINTR { continue } else { return } }
            for (from, to) in [(0, 1), (1, 0)] where fds[from].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { recv(fds[from].fd, $0.baseAddress, $0.count, 0) }
                guard n > 0, sendAll(fds[to].fd, buffer[..<n]) else { return }
            }
            fds[0].revents = 0
            fds[1].revents = 0
        }
    }
}
