import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking HTTP/1.1 test client over a plain POSIX socket: it sends whatever bytes a test
/// gives it (malformed ones included) and reads responses as they are on the wire. Every read
/// waits at most until its deadline, so a server that hangs fails the test instead of hanging it.
///
/// Its calls block the calling thread: run them with `runBlocking` (a thread of its own), never
/// directly on the Swift concurrency pool the server's handlers need. One thread at a time.
public final class RawHTTPClient: @unchecked Sendable {
    // @unchecked: `buffer` is touched only by the one thread that drives this client.

    /// One response as received.
    public struct RawResponse: Sendable {
        public let status: Int
        public let reason: String
        /// Header fields in order, as sent.
        public let headers: [(name: String, value: String)]
        public let body: [UInt8]
        /// The body ended as its framing said (false: the connection closed or the read
        /// timed out first, e.g. a chunked body without its last chunk).
        public let complete: Bool

        /// The first value of the field `name` (case-insensitive).
        public subscript(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    public let fd: Int32
    /// The default timeout for reads, in seconds.
    public let timeout: Double
    private var buffer: [UInt8] = []
    private var closed = false

    /// Connects to `host:port` (IPv4); throws `POSIXError` when the connection is refused.
    public init(host: String = "127.0.0.1", port: Int, timeout: Double = 10) throws {
        self.timeout = timeout
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            closed = true // nothing for deinit to close
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let code = POSIXErrorCode(rawValue: errno) ?? .ECONNREFUSED
            // Through close(), which deinit (it runs when an init throws) will not repeat: a
            // second close could hit a descriptor another thread has opened meanwhile (it
            // broke the test run's PostgreSQL connections at random).
            close()
            throw POSIXError(code)
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close() }

    /// Closes the socket (idempotent).
    public func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    /// Sends all of `bytes`; false when the peer has gone.
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    @discardableResult
    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Reads one response: status line, header fields and a body framed by Content-Length,
    /// chunked coding, or the end of the connection. 1xx responses are returned on their own.
    /// `isHead`: the request was HEAD (no body follows, whatever the headers say).
    /// Nil when the connection closed or the timeout passed before a whole head arrived.
    public func readResponse(timeout: Double? = nil, isHead: Bool = false) -> RawResponse? {
        let deadline = Date().addingTimeInterval(timeout ?? self.timeout)
        var headEnd = find([13, 10, 13, 10])
        while headEnd == nil {
            guard fill(until: deadline) else { return nil }
            headEnd = find([13, 10, 13, 10])
        }
        let lines = String(decoding: buffer[0..<headEnd!], as: UTF8.self).components(separatedBy: "\r\n")
        buffer.removeFirst(headEnd! + 4)
        let statusParts = lines[0].split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
        let reason = statusParts.count > 2 ? String(statusParts[2]) : ""
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        func response(_ body: [UInt8], complete: Bool) -> RawResponse {
            RawResponse(status: status, reason: reason, headers: headers, body: body, complete: complete)
        }
        let field = { (name: String) in headers.first { $0.name.lowercased() == name }?.value }
        if isHead || status < 200 || status == 204 || status == 304 { return response([], complete: true) }
        if field("transfer-encoding")?.lowercased() == "chunked" {
            return readChunked(deadline: deadline, make: response)
        }
        if let length = field("content-length").flatMap(Int.init) {
            while buffer.count < length {
                guard fill(until: deadline) else { return response(take(buffer.count), complete: false) }
            }
            return response(take(length), complete: true)
        }
        let atEnd = readToEnd(until: deadline)
        return response(take(buffer.count), complete: atEnd)
    }

    /// Everything the server sends until it closes the connection (or the timeout passes).
    public func readUntilClose(timeout: Double? = nil) -> [UInt8] {
        _ = readToEnd(until: Date().addingTimeInterval(timeout ?? self.timeout))
        return take(buffer.count)
    }

    /// Receives until at least `count` bytes wait unread (kept for later reads); false when
    /// the connection closed or the timeout passed first.
    public func receive(atLeast count: Int, timeout: Double? = nil) -> Bool {
        let deadline = Date().addingTimeInterval(timeout ?? self.timeout)
        while buffer.count < count {
            guard fill(until: deadline) else { return false }
        }
        return true
    }

    /// True when the server closes the connection (end of stream or reset) within `timeout`.
    /// Bytes that arrive before are kept for later reads.
    public func isClosedByPeer(timeout: Double? = nil) -> Bool {
        readToEnd(until: Date().addingTimeInterval(timeout ?? self.timeout))
    }

    /// Bytes received but not yet consumed by a read.
    public var pending: [UInt8] { buffer }

    // MARK: Internals

    private enum Fill { case data, closed, timedOut }

    private func readChunked(deadline: Date, make: ([UInt8], Bool) -> RawResponse) -> RawResponse {
        var body: [UInt8] = []
        while true {
            var lineEnd = find([13, 10])
            while lineEnd == nil {
                guard fill(until: deadline) else { return make(body, false) }
                lineEnd = find([13, 10])
            }
            let sizeText = String(decoding: buffer[0..<lineEnd!], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { return make(body, false) }
            buffer.removeFirst(lineEnd! + 2)
            if size == 0 {
                // Trailer fields, then the empty line.
                while true {
                    var end = find([13, 10])
                    while end == nil {
                        guard fill(until: deadline) else { return make(body, false) }
                        end = find([13, 10])
                    }
                    buffer.removeFirst(end! + 2)
                    if end == 0 { return make(body, true) }
                }
            }
            while buffer.count < size + 2 {
                guard fill(until: deadline) else { return make(body, false) }
            }
            body += buffer[0..<size]
            guard buffer[size] == 13, buffer[size + 1] == 10 else { return make(body, false) }
            buffer.removeFirst(size + 2)
        }
    }

    /// Reads until the peer closes; false if the deadline passed first.
    private func readToEnd(until deadline: Date) -> Bool {
        while true {
            switch receive(until: deadline) {
            case .data: continue
            case .closed: return true
            case .timedOut: return false
            }
        }
    }

    /// Receives more bytes; false on close or timeout.
    private func fill(until deadline: Date) -> Bool {
        if case .data = receive(until: deadline) { return true }
        return false
    }

    private func receive(until deadline: Date) -> Fill {
        guard !closed else { return .closed }
        while true {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { return .timedOut }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(min(remaining * 1000 + 1, Double(Int32.max))))
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { return .timedOut }
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            let n = recv(fd, &chunk, chunk.count, 0)
            if n > 0 {
                buffer += chunk[0..<n]
                return .data
            }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            return .closed // 0: orderly close; ECONNRESET and other errors: the connection is gone
        }
    }

    private func take(_ count: Int) -> [UInt8] {
        let out = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return out
    }

    private func find(_ pattern: [UInt8]) -> Int? {
        guard buffer.count >= pattern.count else { return nil }
        return buffer.withUnsafeBufferPointer { b in
            var i = 0
            while i + pattern.count <= b.count {
                if b[i] == pattern[0] {
                    var k = 1
                    while k < pattern.count && b[i + k] == pattern[k] { k += 1 }
                    if k == pattern.count { return i }
                }
                i += 1
            }
            return nil
        }
    }
}

/// Runs blocking work (socket calls, sleeps) on a thread of its own and awaits its result, so
/// that it never occupies a thread of the Swift concurrency pool the server's handlers run on.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { done in
        let thread = Thread { done.resume(with: Result { try body() }) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}
