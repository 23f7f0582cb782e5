import BFFTesting
import Foundation
@testable import HTTPCore
import Testing

/// Graceful shutdown and many concurrent clients.
@Suite("live server: shutdown and load")
struct ServerLifecycleLiveTests {
    @Test("graceful shutdown: the request in flight completes with Connection: close, idle connections close, then connects are refused")
    func gracefulShutdown() async throws {
        let server = try TestHTTPServer.start(router: LiveRoutes.router)
        let port = server.port
        let (busy, idle) = try await runBlocking { () throws -> (RawHTTPClient, RawHTTPClient) in
            let idle = try RawHTTPClient(port: port)
            idle.send(get("/fast"))
            _ = idle.readResponse()
            let busy = try RawHTTPClient(port: port)
            busy.send(get("/slow?inflight"))
            Thread.sleep(forTimeInterval: 0.1)  // the handler is now sleeping its 300 ms
            return (busy, idle)
        }
        let started = ContinuousClock.now
        async let stopped: Void = server.shutdown(gracePeriod: .seconds(5))
        let (response, busyClosed, idleClosed) = try await runBlocking { () -> (RawHTTPClient.RawResponse?, Bool, Bool) in
            let response = busy.readResponse(timeout: 5)
            return (response, busy.isClosedByPeer(timeout: 5), idle.isClosedByPeer(timeout: 5))
        }
        await stopped
        let took = ContinuousClock.now - started
        #expect(response?.status == 200 && response?.text == "slow inflight" && response?.complete == true)
        #expect(response?["Connection"] == "close")
        #expect(busyClosed && idleClosed)
        #expect(took >= .milliseconds(150), "shutdown did not wait for the request in flight")
        #expect(took < .seconds(5), "shutdown waited for the whole grace period")
        let refused = try await runBlocking { () -> Bool in
            do { _ = try RawHTTPClient(port: port); return false } catch { return true }
        }
        #expect(refused, "a connection was accepted after shutdown")
    }

    @Test("shutdown waits no longer than the grace period for a request that does not finish")
    func gracePeriodBounded() async throws {
        var router = Router()
        router.get("/forever") { _ in try await Task.sleep(for: .seconds(10)); return .text("late") }
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
        #expect(took >= .milliseconds(250) && took < .seconds(5))
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
