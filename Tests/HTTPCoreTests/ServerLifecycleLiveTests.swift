import BFFTesting
import Foundation
@testable import HTTPCore
import Testing

/// Graceful shutdown and many concurrent clients.
@Suite("live server: shutdown and load")
struct ServerLifecycleLiveTests {
    @Test("graceful shutdown: the request in flight completes with Connection: close, idle connections close, then connects are refused")
    func gracefulShutdown() async throws {
        // The handler answers only when the test says so: after shutdown has begun.
        let (released, release) = AsyncStream<Void>.makeStream()
        var router = LiveRoutes.router
        router.get("/held") { _ in
            for await _ in released { break }
            return .text("held")
        }
        let server = try TestHTTPServer.start(router: router)
        let port = server.port
        let (busy, idle) = try await runBlocking { () throws -> (RawHTTPClient, RawHTTPClient) in
            let idle = try RawHTTPClient(port: port)
            idle.send(get("/fast"))
            _ = idle.readResponse()
            let busy = try RawHTTPClient(port: port)
            busy.send(get("/held"))
            return (busy, idle)
        }
        while server.inFlight.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(5)) }
        async let stopped: Void = server.shutdown(gracePeriod: .seconds(20))
        while !server.isDraining { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(200))
        let releasedAt = ContinuousClock.now
        release.yield()
        let (response, busyClosed, idleClosed) = try await runBlocking { () -> (RawHTTPClient.RawResponse?, Bool, Bool) in
            let response = busy.readResponse(timeout: 10)
            return (response, busy.isClosedByPeer(timeout: 10), idle.isClosedByPeer(timeout: 10))
        }
        await stopped
        #expect(response?.status == 200 && response?.text == "held" && response?.complete == true)
        #expect(response?["Connection"] == "close")
        #expect(busyClosed && idleClosed)
        #expect(ContinuousClock.now - releasedAt < .seconds(15), "shutdown waited for the whole grace period")
        let refused = try await runBlocking { () -> Bool in
            do { _ = try RawHTTPClient(port: port); return false } catch { return true }
        }
        #expect(refused, "a connection was accepted after shutdown")
    }

    @Test("shutdown waits no longer than the grace period for a request that does not finish")
    func gracePeriodBounded() async throws {
        var router = Router()
        router.get("/forever") { _ in try await Task.sleep(for: .seconds(120)); return .text("late") }
        let server = try TestHTTPServer.start(router: router)
        let port = server.port
        let client = try await runBlocking { () throws -> RawHTTPClient in
            let c = try RawHTTPClient(port: port)
            c.send(get("/forever"))
            Thread.sleep(forTimeInterval: 0.1)
            return c
        }
        let started = ContinuousClock.now
        await server.shutdown(gracePeriod: .milliseconds(300))
        let took = ContinuousClock.now - started
        let closed = try await runBlocking { client.isClosedByPeer(timeout: 5) }
        #expect(took >= .milliseconds(250) && took < .seconds(60)) // 'no hang': the handler would take 120 s
        #expect(closed)
    }

    @Test("200 concurrent clients × 20 requests each all succeed")
    func concurrentClients() async throws {
        try await withLiveServer { server in
            let port = server.port
            let counts = try await withThrowingTaskGroup(of: Int.self) { group in
                for client in 0..<200 {
                    group.addTask {
                        try await runBlocking { () throws -> Int in
                            let c = try RawHTTPClient(port: port, timeout: 20)
                            var ok = 0
                            for i in 0..<20 {
                                c.send(get("/fast?c\(client)r\(i)"))
                                if c.readResponse()?.text == "fast c\(client)r\(i)" { ok += 1 }
                            }
                            return ok
                        }
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(counts.count == 200)
            #expect(counts.reduce(0, +) == 4000)
        }
    }
}
