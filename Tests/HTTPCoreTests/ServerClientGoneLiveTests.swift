import BFFTesting
import Foundation
@testable import HTTPCore
import Testing

/// A client that closes its connection while a handler works: a route that gives up on it
/// has its handler cancelled; any other route's handler runs to its end.
@Suite("live server: clients that leave before the answer")
struct ServerClientGoneLiveTests {
    /// What the handlers saw: started, cancelled (woken early from a 10 s wait), finished.
    final class Seen: Sendable {
        let started = Counter(), cancelled = Counter(), finished = Counter()
    }

    /// `GET /wait?ms` (cancelled when its client leaves) waits `ms` (10 s by default);
    /// `GET /must-finish` (not cancelled) waits 1 s in steps it does not let cancellation cut short.
    static func router(_ seen: Seen) -> Router {
        var router = Router()
        router.get("/wait", cancelledWhenClientLeaves: true) { request in
            seen.started.increment()
            do { try await Task.sleep(for: .milliseconds(Int(request.query ?? "") ?? 10_000)) } catch {
                seen.cancelled.increment()
                throw error
            }
            seen.finished.increment()
            return Response(status: .ok, contentType: "text/plain", body: Array("waited".utf8))
        }
        router.get("/wait-stream", cancelledWhenClientLeaves: true) { _ in
            Response(status: .ok, headers: ["Content-Type": "text/plain"], body: .stream(length: nil) { writer in
                try await writer.write(Array("first piece".utf8))
                seen.started.increment()
                do { try await Task.sleep(for: .seconds(10)) } catch {
                    seen.cancelled.increment()
                    throw error
                }
                seen.finished.increment()
                try await writer.write(Array("second piece".utf8))
            })
        }
        router.onImmediate("GET", "/now") { _ in Response(status: .ok, contentType: "text/plain", body: Self.nowBody) }
        router.get("/must-finish") { _ in
            seen.started.increment()
            for _ in 0..<10 { try? await Task.sleep(for: .milliseconds(100)) }
            if Task.isCancelled { seen.cancelled.increment() }
            seen.finished.increment()
            return Response(status: .ok, contentType: "text/plain", body: Array("finished".utf8))
        }
        return router
    }

    /// `/now`'s answer: 1 MiB, more than loopback's socket buffers take while the client waits.
    static let nowBody = [UInt8](repeating: UInt8(ascii: "n"), count: 1 << 20)

    static func withServer(_ body: (HTTPServer, Seen) async throws -> Void) async throws {
        let seen = Seen()
        let server = try TestHTTPServer.start(router: router(seen))
        do {
            try await body(server, seen)
        } catch {
            await server.shutdown(gracePeriod: .milliseconds(200))
            throw error
        }
        await server.shutdown(gracePeriod: .milliseconds(200))
    }

    /// Sends `GET target`, waits until its handler has started, then closes the socket the
    /// way `close` says (a FIN, or a reset with `SO_LINGER` 0).
    static func leave(port: Int, target: String, seen: Seen, reset: Bool) async throws {
        try await runBlocking {
            let c = try RawHTTPClient(port: port, timeout: 10)
            _ = c.send(get(target))
            let deadline = Date().addingTimeInterval(10)
            while seen.started.current == 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            if reset {
                var off = linger(l_onoff: 1, l_linger: 0)
                setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &off, socklen_t(MemoryLayout<linger>.size))
            }
            c.close()
        }
    }

    /// Polls `condition` for up to `seconds`.
    static func eventually(within seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() > deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    @Test("a client that closes or resets while a cancellable route waits, or streams its body: the handler (or producer) is cancelled at once, not after its 10 s",
          arguments: [("/wait", false), ("/wait", true), ("/wait-stream", false)])
    func cancellableRoute(target: String, reset: Bool) async throws {
        try await Self.withServer { server, seen in
            try await Self.leave(port: server.port, target: target, seen: seen, reset: reset)
            #expect(await Self.eventually(within: 3) { seen.cancelled.current == 1 }, "not cancelled within 3 s")
            #expect(seen.finished.current == 0)
            #expect(await Self.eventually(within: 3) { server.inFlight.load(ordering: .relaxed) == 0 })
        }
    }

    @Test("a client that pipelines a cancellable request behind another, then closes: it is cancelled when its turn comes, not run for its 10 s")
    func closedBeforeItsTurn() async throws {
        try await Self.withServer { server, seen in
            let port = server.port
            let first = try await runBlocking { () throws -> RawHTTPClient.RawResponse? in
                let c = try RawHTTPClient(port: port, timeout: 10)
                _ = c.send(get("/must-finish") + get("/wait"))
                shutdown(c.fd, Int32(SHUT_WR)) // read while /must-finish works: /wait's turn comes after the close
                defer { c.close() }
                return c.readResponse()
            }
            #expect(first?.text == "finished") // a half-close still gets what was not given up
            #expect(await Self.eventually(within: 3) { seen.cancelled.current == 1 }, "the pipelined handler not cancelled within 3 s")
            #expect(seen.finished.current == 1)
        }
    }

    @Test("a 1 MiB answer, then a cancellable request, then the client's close, all at once: the answer arrives whole, then a clean close")
    func earlierAnswerSurvives() async throws {
        try await Self.withServer { server, seen in
            let port = server.port
            let (first, rest) = try await runBlocking { () throws -> (RawHTTPClient.RawResponse?, [UInt8]) in
                let c = try RawHTTPClient(port: port, timeout: 10)
                _ = c.send(get("/now") + get("/wait"))
                shutdown(c.fd, Int32(SHUT_WR))
                Thread.sleep(forTimeInterval: 0.3) // the server reads the close while most of the answer waits to be sent
                defer { c.close() }
                return (c.readResponse(), c.readUntilClose(timeout: 5))
            }
            #expect(first?.body == Self.nowBody && first?.complete == true, "\(first?.body.count ?? -1) bytes")
            #expect(rest.isEmpty, "bytes after the first answer")
            #expect(await Self.eventually(within: 3) { seen.cancelled.current == 1 })
            #expect(seen.finished.current == 0)
        }
    }

    @Test("a client that closes while another route works: that handler runs to its end, uncancelled")
    func otherRoute() async throws {
        try await Self.withServer { server, seen in
            try await Self.leave(port: server.port, target: "/must-finish", seen: seen, reset: false)
            #expect(await Self.eventually(within: 5) { seen.finished.current == 1 })
            #expect(seen.cancelled.current == 0)
        }
    }

    @Test("a client that stays gets the cancellable route's answer")
    func clientStays() async throws {
        try await Self.withServer { server, _ in
            let port = server.port
            let response = try await runBlocking { () throws -> RawHTTPClient.RawResponse? in
                let c = try RawHTTPClient(port: port, timeout: 15)
                _ = c.send(get("/wait?300"))
                return c.readResponse()
            }
            #expect(response?.status == 200)
            #expect(response.map { String(decoding: $0.body, as: UTF8.self) } == "waited")
        }
    }
}
