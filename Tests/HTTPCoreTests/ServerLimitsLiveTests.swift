import BFFTesting
import Foundation
@testable import HTTPCore
import Logging
import Synchronization
import Testing

/// Limits and timeouts on live connections, with small configured values so the suite stays fast.
/// Upper time bounds only say "no hang": they leave room for a loaded 2-core machine.
@Suite("live server: limits and timeouts")
struct ServerLimitsLiveTests {
    typealias Outcome = (status: Int?, closed: Bool)

    @Test("over-long request line 414, large header block 431, large body 413 before it is sent; each closes")
    func limits() async throws {
        try await withLiveServer({ c in
            c.limits.maxRequestLineBytes = 256
            c.limits.maxHeaderBytes = 512
            c.limits.maxBodyBytes = 100
        }) { server in
            let port = server.port
            let outcomes = try await runBlocking { () throws -> [Outcome] in
                try [get("/" + String(repeating: "a", count: 300)),
                     get("/fast", "X-Big: " + String(repeating: "b", count: 600) + "\r\n"),
                     "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 101\r\n\r\n"].map { raw in
                    let c = try RawHTTPClient(port: port)
                    c.send(raw)
                    return (c.readResponse(timeout: 5)?.status, c.isClosedByPeer(timeout: 5))
                }
            }
            #expect(outcomes.map(\.status) == [414, 431, 413])
            #expect(outcomes.map(\.closed) == [true, true, true])
        }
    }

    @Test("slow-loris: a head still unfinished after requestReadTimeout gets 408 and the connection closes")
    func requestReadTimeout() async throws {
        try await withLiveServer({ $0.requestReadTimeout = 0.5 }) { server in
            let port = server.port
            let (status, closed, elapsed) = try await runBlocking { () throws -> (Int?, Bool, Double) in
                let c = try RawHTTPClient(port: port)
                let started = Date()
                c.send("GET /fast HTTP/1.1\r\nHost: t\r\nX-Slow: ")
                Thread.sleep(forTimeInterval: 0.2)
                c.send("still")  // trickling bytes does not extend the deadline
                let status = c.readResponse(timeout: 10)?.status
                return (status, c.isClosedByPeer(timeout: 5), Date().timeIntervalSince(started))
            }
            #expect(status == 408)
            #expect(closed)
            // Below the 10 s default, so a setting not applied fails; the rest is room for a
            // loaded machine (the client and the server's loop run on threads of their own).
            #expect(elapsed >= 0.45 && elapsed < 8, "408 after \(elapsed) s")
        }
    }

    @Test("a request begun while the one before is answered gets its 408 too: its time runs once the server reads again")
    func requestReadTimeoutAfterResponse() async throws {
        try await withLiveServer({ $0.requestReadTimeout = 0.5; $0.idleTimeout = 30 }) { server in
            let port = server.port
            let (first, second, closed, elapsed) = try await runBlocking { () throws -> (Int?, Int?, Bool, Double) in
                let c = try RawHTTPClient(port: port)
                c.send(get("/slow"))
                Thread.sleep(forTimeInterval: 0.1) // /slow (300 ms) is being answered
                c.send("GET /fast HTTP/1.1\r\nHost: t\r\nX-Slow: ")
                let first = c.readResponse(timeout: 10)?.status
                let started = Date()
                let second = c.readResponse(timeout: 20)?.status
                return (first, second, c.isClosedByPeer(timeout: 5), Date().timeIntervalSince(started))
            }
            #expect(first == 200)
            #expect(second == 408, "the unfinished request was held until the idle timeout")
            #expect(closed)
            #expect(elapsed < 8, "408 after \(elapsed) s") // the idle timeout is 30 s
        }
    }

    @Test("a refused HEAD request (400, 408) gets a head with no body")
    func headRefusals() async throws {
        try await withLiveServer({ $0.requestReadTimeout = 0.5 }) { server in
            let port = server.port
            let (malformed, late, long, badVersion) = try await runBlocking { () throws -> (String, String, String, String) in
                func answer(_ request: String) throws -> String {
                    let c = try RawHTTPClient(port: port)
                    c.send(request)
                    return String(decoding: c.readUntilClose(timeout: 10), as: UTF8.self)
                }
                // The last two are refused before the request line has been read whole.
                return (try answer("HEAD /fast HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n"),
                        try answer("HEAD /fast HTTP/1.1\r\nHost: t\r\nX-Slow: "),
                        try answer("HEAD /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: t\r\n\r\n"),
                        try answer("HEAD /fast HTTP/1.1\rHost: t\r\n\r\n"))
            }
            for (text, status) in [(malformed, "400"), (late, "408"), (long, "414"), (badVersion, "400")] {
                #expect(text.hasPrefix("HTTP/1.1 \(status) "), "\(text)")
                #expect(text.hasSuffix("\r\n\r\n"), "a body after the head: \(text)")
            }
        }
    }

    @Test("a connection that never sends a byte is closed after the request read timeout, not the longer keep-alive idle timeout")
    func silentConnection() async throws {
        try await withLiveServer({ $0.requestReadTimeout = 0.5; $0.idleTimeout = 30 }) { server in
            let port = server.port
            let (closed, after) = try await runBlocking { () throws -> (Bool, Double) in
                let c = try RawHTTPClient(port: port)
                let started = Date()
                return (c.isClosedByPeer(timeout: 20), Date().timeIntervalSince(started))
            }
            #expect(closed)
            #expect(after >= 0.3 && after < 8, "closed after \(after) s") // the idle timeout is 30 s
        }
    }

    @Test("an idle keep-alive connection is closed after idleTimeout")
    func idleTimeout() async throws {
        try await withLiveServer({ $0.idleTimeout = 0.5 }) { server in
            let port = server.port
            let (status, closed, idle) = try await runBlocking { () throws -> (Int?, Bool, Double) in
                let c = try RawHTTPClient(port: port)
                c.send(get("/fast"))
                let status = c.readResponse()?.status
                let started = Date()
                return (status, c.isClosedByPeer(timeout: 10), Date().timeIntervalSince(started))
            }
            #expect(status == 200)
            #expect(closed)
            #expect(idle >= 0.3 && idle < 8, "closed after \(idle) s idle") // well below the 60 s default
        }
    }

    @Test("a connection that is busy is not closed for idleness")
    func activeConnectionKept() async throws {
        // Gaps of 0.45 s against a 3 s idle timeout: a late wake-up of the client on a loaded
        // machine has 2.5 s of room, while the whole exchange (8 gaps, 3.6 s) outlasts the
        // timeout, so idleness counted from the connection's start, not its last request, fails.
        try await withLiveServer({ $0.idleTimeout = 3 }) { server in
            let port = server.port
            let ok = try await runBlocking { () throws -> Int in
                let c = try RawHTTPClient(port: port)
                var ok = 0
                for _ in 0..<8 {
                    Thread.sleep(forTimeInterval: 0.45)
                    c.send(get("/fast"))
                    if c.readResponse()?.status == 200 { ok += 1 }
                }
                return ok
            }
            #expect(ok == 8)
        }
    }

    @Test("maxRequestsPerConnection: the Nth response carries Connection: close, then the server closes")
    func maxRequestsPerConnection() async throws {
        try await withLiveServer({ $0.maxRequestsPerConnection = 3 }) { server in
            let port = server.port
            let (connectionHeaders, closed) = try await runBlocking { () throws -> ([String?], Bool) in
                let c = try RawHTTPClient(port: port)
                var headers: [String?] = []
                for _ in 1...3 {
                    c.send(get("/fast"))
                    let r = c.readResponse()
                    headers.append(r == nil ? "(no response)" : r?["Connection"] ?? "(none)")
                }
                return (headers, c.isClosedByPeer(timeout: 5))
            }
            #expect(connectionHeaders == ["(none)", "(none)", "close"])
            #expect(closed)
        }
    }

    @Test("maxConnections: with a limit of 2, a third connection gets 503 and the first two still work; the log says why, once")
    func maxConnections() async throws {
        let lines = CapturedLog()
        let server = try TestHTTPServer.start(router: LiveRoutes.router, logger: lines.logger) { $0.maxConnections = 2 }
        defer { Task { await server.shutdown(gracePeriod: .milliseconds(200)) } }
        let port = server.port
        let statuses = try await runBlocking { () throws -> [Int?] in
            let a = try RawHTTPClient(port: port), b = try RawHTTPClient(port: port)
            a.send(get("/fast")); let first = a.readResponse()?.status
            b.send(get("/fast")); let second = b.readResponse()?.status
            let c = try RawHTTPClient(port: port)
            c.send(get("/fast"))
            let refused = c.readResponse(timeout: 5)
            let retryAfter = refused?["Retry-After"] == "1" ? 1 : 0
            let closed = c.isClosedByPeer(timeout: 5) ? 1 : 0
            let d = try RawHTTPClient(port: port)
            d.send(get("/fast"))
            let refusedAgain = d.readResponse(timeout: 5)?.status
            a.send(get("/fast")); let third = a.readResponse()?.status
            b.send(get("/fast")); let fourth = b.readResponse()?.status
            return [first, second, refused?.status, retryAfter, closed, refusedAgain, third, fourth]
        }
        #expect(statuses == [200, 200, 503, 1, 1, 503, 200, 200])
        #expect(lines.messages.filter { $0.hasPrefix("connection limit reached") } == ["connection limit reached: new connections are answered 503"],
                "\(lines.messages)")
    }
}

/// A logger whose messages (warning and above) are kept, for tests that check what the log says.
final class CapturedLog: Sendable {
    private let kept = Mutex<[String]>([])
    var messages: [String] { kept.withLock { $0 } }

    var logger: Logger {
        Logger(label: "smart-bff.http.test") { _ in Handler(log: self) }
    }

    fileprivate func keep(_ message: String) { kept.withLock { $0.append(message) } }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .warning
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String, function: String, line: UInt) {
            log.keep(message.description)
        }
    }
}
