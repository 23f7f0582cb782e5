import BFFTesting
import Foundation
@testable import HTTPCore
import Testing

/// Clients that do not read, stop sending, or keep sending after a refusal; and responses
/// whose framing must not lie. Each over real sockets against a fresh server.
@Suite("live server: backlogs, half-closes, lingering and framing")
struct ServerClosingLiveTests {
    static let bigSize = 256 * 1024

    /// `GET /big?n` answers at once with 256 KiB starting "n=<n>;"; `GET /unchanged` is a 304
    /// with an in-memory (empty) body; `GET /overlong` declares 10 bytes and writes 20.
    static func router(counting answered: Counter) -> Router {
        var router = Router()
        router.onImmediate("GET", "/big") { r in
            answered.increment()
            var body = Array("n=\(r.query ?? "");".utf8)
            body += [UInt8](repeating: UInt8(ascii: "x"), count: bigSize - body.count)
            return Response(status: .ok, contentType: "application/octet-stream", body: body)
        }
        router.onImmediate("GET", "/unchanged") { _ in Response(status: .notModified) }
        router.get("/overlong") { _ in
            Response(status: .ok, headers: ["Content-Type": "text/plain"], body: .stream(length: 10) { writer in
                try await writer.write(Array("0123456789ABCDEFGHIJ".utf8))
            })
        }
        return router
    }

    static func withServer(_ configure: (inout ServerConfiguration) -> Void = { _ in },
                           _ body: (HTTPServer, Counter) async throws -> Void) async throws {
        let answered = Counter()
        let server = try TestHTTPServer.start(router: router(counting: answered), configure: configure)
        do {
            try await body(server, answered)
        } catch {
            await server.shutdown(gracePeriod: .milliseconds(200))
            throw error
        }
        await server.shutdown(gracePeriod: .milliseconds(200))
    }

    @Test("a client pipelining 200 requests without reading: the server answers a few, then waits; once it reads, every answer comes, in order")
    func pipelinedBacklog() async throws {
        try await Self.withServer { server, answered in
            let port = server.port
            let count = 200 // 50 MiB of answers, were they all held
            let (whileNotReading, bodies) = try await runBlocking { () throws -> (Int, [String]) in
                let c = try RawHTTPClient(port: port, timeout: 30)
                c.send((0..<count).map { get("/big?\($0)") }.joined())
                // Until the server has answered some and then stops: no new answer for 0.5 s.
                var last = 0
                let deadline = Date().addingTimeInterval(30)
                while (answered.current != last || last == 0) && Date() < deadline {
                    last = answered.current
                    Thread.sleep(forTimeInterval: 0.5)
                }
                let bodies = (0..<count).map { _ in
                    c.readResponse().map { String(decoding: $0.body.prefix(while: { $0 != UInt8(ascii: ";") }), as: UTF8.self) + ($0.body.count == Self.bigSize ? "" : " short") } ?? "none"
                }
                return (last, bodies)
            }
            // What the kernel's socket buffers take plus the server's 256 KiB high-water mark:
            // a few answers, not all 200.
            #expect(whileNotReading < 50, "\(whileNotReading) answers made while the client read nothing")
            #expect(bodies == (0..<count).map { "n=\($0)" })
            #expect(answered.current == count)
        }
    }

    @Test("a client that closes its sending side after 64 pipelined requests still gets every answer whole, then a clean close; so does one that leaves a request unfinished behind them",
          arguments: ["", "GET /big?unfinished HTTP/1.1\r\nHo"])
    func halfClose(unfinished: String) async throws {
        try await Self.withServer { server, _ in
            let port = server.port
            let count = 64 // 16 MiB: more than loopback's socket buffers hold
            let (bodies, closed) = try await runBlocking { () throws -> ([String], Bool) in
                let c = try RawHTTPClient(port: port, timeout: 30)
                c.send((0..<count).map { get("/big?\($0)") }.joined() + unfinished)
                shutdown(c.fd, Int32(SHUT_WR))
                Thread.sleep(forTimeInterval: 0.5) // the server sees the close before the client reads anything
                let bodies = (0..<count).map { _ in
                    c.readResponse().map { $0.complete && $0.body.count == Self.bigSize ? String(decoding: $0.body.prefix(while: { $0 != UInt8(ascii: ";") }), as: UTF8.self) : "incomplete" } ?? "none"
                }
                return (bodies, c.isClosedByPeer(timeout: 5))
            }
            #expect(bodies == (0..<count).map { "n=\($0)" })
            #expect(closed)
        }
    }

    @Test("a refused request's body is read and dropped: a client that sends 16 MiB anyway gets the 413, not a reset")
    func lingeringAfterRefusal() async throws {
        try await Self.withServer({ $0.limits.maxBodyBytes = 100 }) { server, _ in
            let port = server.port
            let (sent, status, closed) = try await runBlocking { () throws -> (Bool, Int?, Bool) in
                let c = try RawHTTPClient(port: port, timeout: 30)
                let size = 16 << 20 // more than loopback's socket buffers hold
                let sent = c.send(Array("POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: \(size)\r\n\r\n".utf8)
                    + [UInt8](repeating: 0x61, count: size))
                return (sent, c.readResponse()?.status, c.isClosedByPeer(timeout: 10))
            }
            #expect(sent, "the server reset the connection while the body was being sent")
            #expect(status == 413)
            #expect(closed)
        }
    }

    @Test("a 304 carries no Content-Length (it would have to be the 200's), and the connection goes on")
    func notModifiedLength() async throws {
        try await Self.withServer { server, _ in
            let port = server.port
            let (first, second) = try await runBlocking { () throws -> (RawHTTPClient.RawResponse?, RawHTTPClient.RawResponse?) in
                let c = try RawHTTPClient(port: port)
                c.send(get("/unchanged") + get("/big?after"))
                return (c.readResponse(), c.readResponse())
            }
            #expect(first?.status == 304)
            #expect(first?["Content-Length"] == nil)
            #expect(second.map { String(decoding: $0.body.prefix(8), as: UTF8.self) } == "n=after;")
        }
    }

    @Test("a streamed body longer than its declared length: the client gets no byte beyond it, and the connection ends")
    func overlongStream() async throws {
        try await Self.withServer { server, _ in
            let port = server.port
            let raw = try await runBlocking { () throws -> [UInt8] in
                let c = try RawHTTPClient(port: port)
                c.send(get("/overlong"))
                return c.readUntilClose(timeout: 10)
            }
            let text = String(decoding: raw, as: UTF8.self)
            let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
            #expect(text.hasPrefix("HTTP/1.1 200") && text.contains("Content-Length: 10\r\n"))
            #expect(body.utf8.count <= 10, "body after the head: \(body)")
        }
    }
}
