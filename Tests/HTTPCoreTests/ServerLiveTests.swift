import Foundation
@testable import HTTPCore
import Testing

@Suite("HTTP server over real sockets")
struct ServerLiveTests {
    static func start(_ configure: (inout ServerConfiguration) -> Void = { _ in }) throws -> HTTPServer {
        var router = Router()
        router.onImmediate("GET", "/fast") { _ in .text("fast") }
        router.get("/slow") { _ in try await Task.sleep(for: .milliseconds(300)); return .text("slow") }
        router.post("/echo") { r in Response(status: .ok, contentType: "application/octet-stream", body: r.body) }
        router.get("/stream") { r in
            let fail = r.queryParameter("fail") != nil
            return Response(status: .ok, headers: ["Content-Type": "text/plain"], body: .stream(length: nil) { writer in
                let piece = [UInt8](repeating: UInt8(ascii: "x"), count: 64 * 1024)
                for i in 0..<64 {
                    if fail && i == 8 { struct Stop: Error {}; throw Stop() }
                    try await writer.write(piece)
                }
            })
        }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.eventLoops = 2
        configure(&configuration)
        let server = HTTPServer(configuration: configuration, application: HTTPApplication(router: Router(copying: router)))
        try server.start()
        return server
    }

    @Test("keep-alive and pipelining: responses come back in request order")
    func pipelining() async throws {
        let server = try Self.start()
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        let port = server.port
        try await onThread {
            let c = try RawClient(port: port)
            c.send("GET /fast HTTP/1.1\r\nHost: a\r\n\r\nGET /slow HTTP/1.1\r\nHost: a\r\n\r\nPOST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
            #expect(c.readResponse()?.text == "fast")
            #expect(c.readResponse()?.text == "slow")
            #expect(c.readResponse()?.text == "hello")
            c.send("GET /fast HTTP/1.1\r\nHost: a\r\n\r\n")
            let again = c.readResponse()
            #expect(again?.status == 200 && again?.headers["date"] != nil && again?.headers["connection"] == nil)
        }
    }

    @Test("Connection: close and HTTP/1.0 close after the response")
    func closing() async throws {
        let server = try Self.start()
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        let port = server.port
        try await onThread {
            let c = try RawClient(port: port)
            c.send("GET /fast HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            #expect(c.readResponse()?.headers["connection"] == "close")
            #expect(c.isClosedByPeer())
            let d = try RawClient(port: port)
            d.send("GET /fast HTTP/1.0\r\n\r\n")
            #expect(d.readResponse()?.status == 200)
            #expect(d.isClosedByPeer())
        }
    }

    @Test("a smuggling attempt gets 400 and the connection is closed")
    func smuggling() async throws {
        let server = try Self.start()
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        let port = server.port
        try await onThread {
            let c = try RawClient(port: port)
            c.send("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /fast HTTP/1.1\r\nHost: a\r\n\r\n")
            let r = c.readResponse()
            #expect(r?.status == 400 && r?.headers["content-type"] == "application/problem+json" && r?.headers["connection"] == "close")
            #expect(c.isClosedByPeer())
        }
    }

    @Test("limits on a live connection: 414, 431, 413")
    func limits() async throws {
        let server = try Self.start { $0.limits.maxBodyBytes = 100 }
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        let port = server.port
        try await onThread {
            for (raw, status) in [("GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414),
                                  ("GET /fast HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 17_000) + "\r\n\r\n", 431),
                                  ("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n", 413)] {
                let c = try RawClient(port: port)
                c.send(raw)
                #expect(c.readResponse()?.status == status)
                #expect(c.isClosedByPeer())
            }
        }
    }

    @Test("slow-loris: an unfinished head gets 408 and the connection closes; idle keep-alive closes")
    func timeouts() async throws {
        let server = try Self.start { $0.requestReadTimeout = 0.5; $0.idleTimeout = 0.5 }
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        let port = server.port
        try await onThread {
            let c = try RawClient(port: port)
            let started = Date()
            c.send("GET /fast HTTP/1.1\r\nHost: a\r\nX-Slow: ")
            #expect(c.readResponse()?.status == 408)
            #expect(c.isClosedByPeer())
            #expect(Date().timeIntervalSince(started) < 6) // 0.5 s configured; the bound only says "no hang" under load
            let idle = try RawClient(port: port)
            idle.send("GET /fast HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(idle.readResponse()?.status == 200)
            #expect(idle.isClosedByPeer())
        }
    }

    @Test("maxRequestsPerConnection: the last response says Connection: close")
    func requestsPerConnection() async throws {
        let server = try Self.start { $0.maxRequestsPerConnection = 3 }
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        let port = server.port
        try await onThread {
            let c = try RawClient(port: port)
            for i in 1...3 {
                c.send("GET /fast HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(c.readResponse()?.headers["connection"] == (i == 3 ? "close" : nil))
            }
            #expect(c.isClosedByPeer())
        }
    }

    @Test("beyond maxConnections: 503 for the newcomer, the others keep working")
    func maxConnections() async throws {
        let server = try Self.start { $0.maxConnections = 2 }
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        let port = server.port
        try await onThread {
            let a = try RawClient(port: port), b = try RawClient(port: port)
            a.send("GET /fast HTTP/1.1\r\nHost: a\r\n\r\n"); #expect(a.readResponse()?.status == 200)
            b.send("GET /fast HTTP/1.1\r\nHost: a\r\n\r\n"); #expect(b.readResponse()?.status == 200)
            let c = try RawClient(port: port)
            #expect(c.readResponse()?.status == 503)
            a.send("GET /fast HTTP/1.1\r\nHost: a\r\n\r\n"); #expect(a.readResponse()?.status == 200)
        }
    }

    @Test("streamed responses: 4 MiB chunked arrives whole; a failing producer never sends the last chunk")
    func streaming() async throws {
        let server = try Self.start()
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        let port = server.port
        try await onThread {
            let c = try RawClient(port: port)
            c.send("GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")
            let r = c.readResponse()
            #expect(r?.headers["transfer-encoding"] == "chunked" && r?.body.count == 64 * 64 * 1024 && r?.complete == true)
            let d = try RawClient(port: port)
            d.send("GET /stream?fail=1 HTTP/1.1\r\nHost: a\r\n\r\n")
            let broken = d.readResponse()
            #expect(broken?.status == 200 && broken?.complete == false)
            let head = try RawClient(port: port)
            head.send("HEAD /fast HTTP/1.1\r\nHost: a\r\n\r\n")
            let h = head.readResponse(headRequest: true)
            #expect(h?.status == 200 && h?.headers["content-length"] == "4")
        }
    }

    @Test("graceful shutdown: the request in flight completes with Connection: close, then new connections are refused")
    func gracefulShutdown() async throws {
        let server = try Self.start()
        let port = server.port
        let (c, idle) = try await onThread { () throws -> (RawClient, RawClient) in
            let c = try RawClient(port: port)
            c.send("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
            Thread.sleep(forTimeInterval: 0.05)
            return (c, try RawClient(port: port))
        }
        async let stopped: Void = server.shutdown(gracePeriod: .seconds(5))
        let (text, connection, idleClosed) = try await onThread { () -> (String?, String?, Bool) in
            let r = c.readResponse()
            return (r?.text, r?.headers["connection"], idle.isClosedByPeer())
        }
        #expect(text == "slow" && connection == "close")
        #expect(idleClosed)
        await stopped
        #expect(throws: (any Error).self) { try RawClient(port: port) }
    }

    @Test("200 concurrent clients × 20 requests all succeed")
    func concurrency() async throws {
        let server = try Self.start()
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        let port = server.port
        let ok = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<200 {
                group.addTask {
                    await withCheckedContinuation { done in
                        Thread {
                            var count = 0
                            if let c = try? RawClient(port: port) {
                                for _ in 0..<20 {
                                    c.send("GET /fast HTTP/1.1\r\nHost: a\r\n\r\n")
                                    if c.readResponse()?.text == "fast" { count += 1 }
                                }
                            }
                            done.resume(returning: count)
                        }.start()
                    }
                }
            }
            return await group.reduce(0, +)
        }
        #expect(ok == 4000)
    }
}

extension Router {
    init(copying other: Router) { self = other }
}
