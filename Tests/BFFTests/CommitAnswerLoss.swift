import BFFTesting
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A relay in front of the test cluster's Unix socket that loses the answer to the first
/// `COMMIT` sent through it: PostgreSQL commits, and the client's connection breaks before it
/// hears so (a failover or a network cut at the worst moment). Each connection is relayed on
/// two threads; the client's messages are read one by one (PostgreSQL's frontend framing) to
/// find the `COMMIT`.
final class CommitAnswerLoss: Sendable {
    /// `url` with its socket folder replaced by the relay's.
    let url: String
    private let listener: Int32
    private let directory: String
    private let armed: Atomic<Bool>
    /// Set once a `COMMIT`'s answer has been thrown away.
    private let lost = Atomic(false)
    /// With it, the loss cuts every relayed connection and lets no new one through.
    private let awayAfterLoss: Bool
    /// Both sockets of every connection being relayed (closed under this lock).
    private let relayed = Mutex<[Int32]>([])
    private let shut = Atomic(false)

    var answerLost: Bool { lost.load(ordering: .acquiring) }

    /// Relays to the server of `url` (`postgresql:///DB?host=<folder>&port=N…`). Loses the
    /// first `COMMIT`'s answer, or, unless `armed`, the first after `arm()`. With
    /// `awayAfterLoss`, the database is away from that moment on, for every connection
    /// through the relay (a failover at the worst moment).
    init(inFrontOf url: String, armed: Bool = true, awayAfterLoss: Bool = false) throws {
        self.armed = Atomic(armed)
        self.awayAfterLoss = awayAfterLoss
        let parts = URLComponents(string: url)!
        let host = parts.queryItems!.first { $0.name == "host" }!.value!
        let port = parts.queryItems!.first { $0.name == "port" }!.value!
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        listener = try CommitAnswerLoss.listen(at: directory + "/.s.PGSQL." + port)
        self.url = url.replacingOccurrences(of: "host=" + host, with: "host=" + directory)
        let server = host + "/.s.PGSQL." + port
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 { if errno == EINTR { continue } else { return } }
                guard let upstream = try? CommitAnswerLoss.connect(to: server) else { Glibc.close(client); continue }
                relay(client, upstream)
            }
        }
    }

    /// Loses the next `COMMIT`'s answer.
    func arm() { armed.store(true, ordering: .releasing) }

    /// Stops accepting; connections already relayed run until either side closes.
    func shutdown() {
        guard !shut.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Stops accepting, and cuts every connection being relayed.
    private func goAway() {
        shutdown()
        relayed.withLock { fds in for fd in fds { Glibc.shutdown(fd, Int32(SHUT_RDWR)) } }
    }

    private func relay(_ client: Int32, _ server: Int32) {
        let dropAnswer = Atomic(false)
        let closed = Atomic(0)
        relayed.withLock { $0 += [client, server] }
        let close = { @Sendable [self] in
            Glibc.shutdown(client, Int32(SHUT_RDWR))
            Glibc.shutdown(server, Int32(SHUT_RDWR))
            guard closed.add(1, ordering: .acquiringAndReleasing).newValue == 2 else { return }
            relayed.withLock { fds in
                fds.removeAll { $0 == client || $0 == server }
                Glibc.close(client)
                Glibc.close(server)
            }
        }
        Thread.detachNewThread { [self] in
            defer { close() }
            // The startup message has no type byte: a length, then the rest.
            guard let length = CommitAnswerLoss.read(client, 4), let rest = CommitAnswerLoss.read(client, CommitAnswerLoss.int32(length) - 4),
                  LoopbackSocket.sendAll(server, (length + rest)[...]) else { return }
            while let head = CommitAnswerLoss.read(client, 5), let body = CommitAnswerLoss.read(client, CommitAnswerLoss.int32(Array(head[1...])) - 4) {
                if head[0] == UInt8(ascii: "Q"), body.starts(with: Array("COMMIT".utf8)), armed.exchange(false, ordering: .acquiringAndReleasing) {
                    dropAnswer.store(true, ordering: .releasing) // before the server can answer
                }
                guard LoopbackSocket.sendAll(server, (head + body)[...]) else { return }
            }
        }
        Thread.detachNewThread { [self] in
            defer { close() }
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(server, $0.baseAddress, $0.count) }
                guard n > 0 else { return }
                // Nothing else is outstanding while a COMMIT waits (libpq waits for each
                // answer): what comes now is its answer, so the commit is done.
                if dropAnswer.load(ordering: .acquiring) {
                    lost.store(true, ordering: .releasing)
                    if awayAfterLoss { goAway() }
                    return
                }
                guard LoopbackSocket.sendAll(client, buffer[..<n]) else { return }
            }
        }
    }

    private static func int32(_ bytes: [UInt8]) -> Int {
        bytes.prefix(4).reduce(0) { $0 << 8 | Int($1) }
    }

    private static func read(_ fd: Int32, _ count: Int) -> [UInt8]? {
        guard count >= 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + got, count - got) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            got += n
        }
        return bytes
    }

    private struct SocketError: Error { let call: String; let code: Int32 }

    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// A listening socket at `path`.
    private static func listen(at path: String) throws -> Int32 {
        let fd = try unixSocket(path) { fd, address, size in bind(fd, address, size) }
        guard Glibc.listen(fd, 16) == 0 else { let code = errno; Glibc.close(fd); throw SocketError(call: "listen", code: code) }
        return fd
    }

    /// A socket connected to the one at `path`.
    private static func connect(to path: String) throws -> Int32 {
        try unixSocket(path) { fd, address, size in Glibc.connect(fd, address, size) }
    }

    /// A new Unix socket, and `call` (bind or connect) of it with the address of `path`.
    private static func unixSocket(_ path: String, _ call: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketError(call: "socket", code: errno) }
        var address = address(path)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else { let code = errno; Glibc.close(fd); throw SocketError(call: path, code: code) }
        return fd
    }
}
