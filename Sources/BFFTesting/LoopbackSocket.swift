import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// TCP sockets bound to 127.0.0.1 on an ephemeral port, for the tests' own servers.
public enum LoopbackSocket {
    /// A socket bound to 127.0.0.1 on a port the kernel picks, and that port. The caller
    /// owns (and closes) the descriptor.
    public static func bind() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
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
}
