import BFFTesting
import Foundation
@testable import HTTPCore

/// The routes the live tests use, and a helper that runs a test against a fresh server.
/// Blocking socket work runs through `runBlocking` and returns values; the expectations are
/// checked on the test's own task, where Swift Testing attributes them.
enum LiveRoutes {
    /// Byte `k` of the streamed body: a pattern, so a lost or repeated piece is noticed.
    static func streamByte(_ k: Int) -> UInt8 { UInt8(truncatingIfNeeded: (k / 65_536) &* 31 &+ k % 251) }
    static let piece = 64 * 1024
    static let pieces = 64

    static let router: Router = {
        var router = Router()
        router.onImmediate("GET", "/fast") { r in .text("fast" + (r.query.map { " " + $0 } ?? "")) }
        router.get("/slow") { r in
            try await Task.sleep(for: .milliseconds(300))
            return .text("slow" + (r.query.map { " " + $0 } ?? ""))
        }
        router.post("/echo") { r in Response(status: .ok, contentType: "application/octet-stream", body: r.body) }
        router.get("/stream") { r in
            let failAfter = r.queryParameter("fail").flatMap(Int.init)
            return Response(status: .ok, headers: ["Content-Type": "application/octet-stream"], body: .stream(length: nil) { writer in
                for i in 0..<pieces {
                    if let failAfter, i == failAfter { struct ProducerFailed: Error {}; throw ProducerFailed() }
                    try await writer.write(Array(expectedStream[i * piece..<(i + 1) * piece]))
                }
            })
        }
        return router
    }()

    /// The whole streamed body, made once: 4 MiB made anew for every use held a thread of
    /// the test run's two-thread task pool for seconds in a debug build.
    static let expectedStream: [UInt8] = (0..<pieces * piece).map(streamByte)
}

/// Starts a server with `LiveRoutes`, runs `body`, then shuts the server down (also on failure).
func withLiveServer(_ configure: (inout ServerConfiguration) -> Void = { _ in },
                    _ body: (HTTPServer) async throws -> Void) async throws {
    let server = try TestHTTPServer.start(router: LiveRoutes.router, configure: configure)
    do {
        try await body(server)
    } catch {
        await server.shutdown(gracePeriod: .milliseconds(200))
        throw error
    }
    await server.shutdown(gracePeriod: .milliseconds(200))
}

/// A request text with the Host field every HTTP/1.1 request needs.
func get(_ target: String, _ extra: String = "") -> String { "GET \(target) HTTP/1.1\r\nHost: t\r\n\(extra)\r\n" }
