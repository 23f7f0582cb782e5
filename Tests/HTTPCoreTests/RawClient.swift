import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking test client over a POSIX socket: sends raw bytes, reads raw responses.
final class RawClient: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int, timeout: Double = 15) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { close(fd); throw POSIXError(.ECONNREFUSED) }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ text: String) { send(Array(text.utf8)) }
    func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }

    /// Reads more bytes; false on close or timeout.
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &chunk, chunk.count, 0)
        guard n > 0 else { return false }
        buffer += chunk[0..<n]
        return true
    }

    struct Response {
        let status: Int
        let headers: [String: String]
        let body: [UInt8]
        /// The body ended as its framing said.
        let complete: Bool
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// Reads one response (Content-Length or chunked); nil when the connection closed first.
    func readResponse(headRequest: Bool = false) -> Response? {
        var headEnd: Int?
        while headEnd == nil {
            if let r = find([13, 10, 13, 10]) { headEnd = r } else if !fill() { return nil }
        }
        let head = String(decoding: buffer[0..<headEnd!], as: UTF8.self).components(separatedBy: "\r\n")
        buffer.removeFirst(headEnd! + 4)
        let status = Int(head[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            if let c = line.firstIndex(of: ":") { headers[line[..<c].lowercased()] = line[line.index(after: c)...].trimmingCharacters(in: .whitespaces) }
        }
        if headRequest || status == 304 || status == 204 { return Response(status: status, headers: headers, body: [], complete: true) }
        if let length = headers["content-length"].flatMap(Int.init) {
            while buffer.count < length { if !fill() { return Response(status: status, headers: headers, body: buffer, complete: false) } }
            let body = Array(buffer[0..<length])
            buffer.removeFirst(length)
            return Response(status: status, headers: headers, body: body, complete: true)
        }
        if headers["transfer-encoding"] == "chunked" {
            var body: [UInt8] = []
            while true {
                while find([13, 10]) == nil { if !fill() { return Response(status: status, headers: headers, body: body, complete: false) } }
                let lineEnd = find([13, 10])!
                let size = Int(String(decoding: buffer[0..<lineEnd], as: UTF8.self), radix: 16) ?? 0
                buffer.removeFirst(lineEnd + 2)
                while buffer.count < size + 2 { if !fill() { return Response(status: status, headers: headers, body: body, complete: false) } }
                if size == 0 { buffer.removeFirst(2); return Response(status: status, headers: headers, body: body, complete: true) }
                body += buffer[0..<size]
                buffer.removeFirst(size + 2)
            }
        }
        while fill() {}
        let body = buffer
        buffer = []
        return Response(status: status, headers: headers, body: body, complete: true)
    }

    /// True when the server closed the connection (end of stream or reset) within the timeout.
    func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, 0)
        return n == 0 || (n < 0 && errno == ECONNRESET)
    }

    private func find(_ pattern: [UInt8]) -> Int? {
        guard buffer.count >= pattern.count else { return nil }
        for i in 0...(buffer.count - pattern.count) where buffer[i] == pattern[0] && Array(buffer[i..<(i + pattern.count)]) == pattern { return i }
        return nil
    }
}

/// Runs blocking socket work on a thread of its own, so that it never starves the Swift
/// concurrency pool the server's handlers run on.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { done in
        Thread { done.resume(with: Result { try body() }) }.start()
    }
}
