import BFFTesting
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A test-only HTTP/1.1 server on 127.0.0.1 (an ephemeral port) that answers from a script:
/// one thread accepts, and each connection runs `script` on a thread of its own, over raw
/// blocking POSIX sockets, so a test controls every byte and every pause.
final class ScriptedServer: Sendable {
    let port: Int
    private let listener: Int32
    private let accepted = Atomic(0)
    private let open = Mutex<[Int32]>([])
    private let received = Mutex<[ReceivedRequest]>([])

    var baseURL: String { "http://127.0.0.1:\(port)" }
    /// Connections accepted so far.
    var connectionCount: Int { accepted.load(ordering: .acquiring) }
    /// Requests read by `ServerConnection.readRequest`, in order.
    var requests: [ReceivedRequest] { received.withLock { $0 } }

    init(_ script: @escaping @Sendable (ServerConnection) -> Void) throws {
        let (fd, port) = try LoopbackSocket.listen(backlog: 512)
        self.port = port
        listener = fd
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    return // shut down
                }
                accepted.add(1, ordering: .acquiringAndReleasing)
                open.withLock { $0.append(client) }
                let connection = ServerConnection(fd: client, server: self)
                Thread.detachNewThread {
                    script(connection)
                    connection.close()
                }
            }
        }
    }

    /// A server that answers every request on every connection with `respond(request)`
    /// (raw bytes of a whole response), keeping connections alive.
    static func responding(_ respond: @escaping @Sendable (ReceivedRequest) -> String) throws -> ScriptedServer {
        try ScriptedServer { connection in
            while let request = connection.readRequest() {
                guard connection.write(respond(request)) else { return }
            }
        }
    }

    /// Stops accepting and closes every connection.
    func shutdown() {
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
        // Under the lock that closing takes: a descriptor closed meanwhile could already be
        // another thread's (a test's PostgreSQL connection, say).
        open.withLock { open in for fd in open { Glibc.shutdown(fd, Int32(SHUT_RDWR)) } }
    }

    /// Closes an accepted connection's descriptor and forgets it, so that `shutdown` never
    /// touches the number once it may be reused.
    fileprivate func close(connection fd: Int32) {
        open.withLock { open in
            open.removeAll { $0 == fd }
            Glibc.close(fd)
        }
    }

    deinit {
        shutdown()
        Glibc.close(listener)
    }

    fileprivate func record(_ request: ReceivedRequest) { received.withLock { $0.append(request) } }
}

/// A request as the server read it.
struct ReceivedRequest: Sendable {
    var method: String
    var target: String
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
}

/// One accepted connection, used by one script thread.
final class ServerConnection: @unchecked Sendable {
    let fd: Int32
    private unowned let server: ScriptedServer
    private var input: [UInt8] = []
    private let closed = Atomic(false)

    fileprivate init(fd: Int32, server: ScriptedServer) {
        self.fd = fd
        self.server = server
    }

    /// Reads one request (head and Content-Length body); nil when the peer closed.
    func readRequest() -> ReceivedRequest? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while true {
            if let range = input.firstRange(of: separator) { headEnd = range.upperBound; break }
            guard fill() else { return nil }
        }
        let lines = String(decoding: input[..<(headEnd! - 4)], as: UTF8.self).components(separatedBy: "\r\n")
        input.removeFirst(headEnd!)
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count == 3 else { return nil }
        let headers: [(String, String)] = lines.dropFirst().compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var request = ReceivedRequest(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers, body: [])
        let length = request.header("Content-Length").flatMap { Int($0) } ?? 0
        while input.count < length { guard fill() else { return nil } }
        request.body = Array(input[..<length])
        input.removeFirst(length)
        server.record(request)
        return request
    }

    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        input += chunk[..<n]
        return true
    }

    /// Writes all of `bytes`; false when the peer has gone.
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    @discardableResult
    func write(_ text: String) -> Bool { write(Array(text.utf8)) }

    /// Waits until the peer closes (or `seconds` pass); true if it closed.
    func waitForPeerClose(seconds: Double) -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if poll(&pfd, 1, 50) > 0 {
                var byte: UInt8 = 0
                if recv(fd, &byte, 1, Int32(MSG_PEEK)) <= 0 { return true }
                usleep(10_000)
            }
        }
        return false
    }

    func setSendBuffer(_ bytes: Int32) {
        var size = bytes
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        server.close(connection: fd)
    }
}

/// A flag one side sets and the other waits for, with a time limit.
final class Gate: Sendable {
    private let opened = Atomic(false)
    func open() { opened.store(true, ordering: .releasing) }
    var isOpen: Bool { opened.load(ordering: .acquiring) }
    /// True if the gate opened within `seconds`. Blocks the calling thread: for script
    /// threads only (a test awaits `opened(within:)`).
    func wait(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !isOpen && Date() < deadline { usleep(1000) }
        return isOpen
    }
}

extension Gate {
    /// For the test's side: waits until the gate opens, sleeping between looks so that no
    /// thread of the concurrency pool is held; false if `seconds` pass first (a 'no hang'
    /// limit only: nothing is measured with it).
    func opened(within seconds: Double) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while !isOpen && ContinuousClock.now < deadline {
            do { try await Task.sleep(for: .milliseconds(10)) } catch { break }
        }
        return isOpen
    }
}
