import BFFTesting
import Foundation
@testable import HTTPCore
import Synchronization
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
        // A grace period far longer than the bound below, which is timed on this task and so
        // leaves room for the concurrency pool to be held up for a while on a loaded machine.
        async let stopped: Void = server.shutdown(gracePeriod: .seconds(120))
        while !server.isDraining { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(200))
        // While the request in flight drains, new connections are refused (another instance
        // can take them), not left in the listen backlog until the drain ends: once every
        // loop has stopped accepting, which a loaded machine may take a moment to get to.
        let refusedWhileDraining = try await runBlocking { () -> Bool in
            for _ in 0..<200 {
                do { _ = try RawHTTPClient(port: port) } catch { return true }
                Thread.sleep(forTimeInterval: 0.05)
            }
            return false
        }
        #expect(refusedWhileDraining, "connections were let in while the server drained")
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
        #expect(ContinuousClock.now - releasedAt < .seconds(60), "shutdown waited for the whole grace period")
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
            return c
        }
        // Shutdown must find the request in flight, or it has nothing to wait for.
        let deadline = ContinuousClock.now + .seconds(30) // no-hang limit
        while server.inFlight.load(ordering: .relaxed) == 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(server.inFlight.load(ordering: .relaxed) == 1, "the request never reached its handler")
        let started = ContinuousClock.now
        await server.shutdown(gracePeriod: .milliseconds(300))
        let took = ContinuousClock.now - started
        let closed = try await runBlocking { client.isClosedByPeer(timeout: 5) }
        #expect(took >= .milliseconds(250) && took < .seconds(60)) // 'no hang': the handler would take 120 s
        #expect(closed)
    }

    /// The handler answers with a stream after the server has dropped the connection (its
    /// grace period over); the producer must still run, once, and see its writes refused,
    /// so that what it holds is let go of (the FHIR proxy's upstream body, its audit entry).
    @Test("a streamed answer whose connection has gone still runs its producer, with writes refused")
    func abandonedStreamProducerRuns() async throws {
        let waiting = Atomic(false)
        let outcome = Mutex<String?>(nil)
        var router = Router()
        router.get("/stream") { _ in
            // Resumed by the loop's stop, after the connection was dropped.
            await withCheckedContinuation { (resume: CheckedContinuation<Void, Never>) in
                EventLoop.current!.whenStopped { resume.resume() }
                waiting.store(true, ordering: .releasing)
            }
            return Response(status: .ok, body: .stream(length: nil) { writer in
                do {
                    try await writer.write(Array("part".utf8))
                    outcome.withLock { $0 = "written" }
                } catch {
                    outcome.withLock { $0 = "refused" }
                    throw error
                }
            })
        }
        let server = try TestHTTPServer.start(router: router) { $0.eventLoops = 1 }
        let port = server.port
        let client = try await runBlocking { () throws -> RawHTTPClient in
            let c = try RawHTTPClient(port: port)
            c.send(get("/stream"))
            return c
        }
        while !waiting.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(5)) }
        await server.shutdown(gracePeriod: .milliseconds(50))
        #expect(outcome.withLock { $0 } == "refused")
        #expect(try await runBlocking { client.readResponse(timeout: 5) } == nil, "no answer on a dropped connection")
    }

    /// A handler still waiting when the server stops resumes later on its I/O thread's
    /// executor: that loop must outlive it (a freed loop would be used after free), while
    /// a stopped server's loops with nothing pending must go (their epoll sets, buffers).
    @Test("a stopped server's I/O threads go, except while a handler still waits on one")
    func stoppedLoopsAreFreedOnlyWhenNothingWaits() async throws {
        let seen = SeenEventLoops()
        let release = Atomic(false)
        var router = Router()
        router.get("/quick") { _ in
            seen.addCurrent(tag: "quick")
            return .text("ok")
        }
        router.get("/waits") { _ in
            seen.addCurrent(tag: "waits")
            while !release.load(ordering: .acquiring) { try? await Task.sleep(for: .milliseconds(10)) }
            return .text("late")
        }
        var server: HTTPServer? = try TestHTTPServer.start(router: router) { $0.eventLoops = 1 }
        #expect(try await getOnce("/quick", port: server!.port)?.status == 200)
        let port = server!.port
        let waiting = try await runBlocking { () throws -> RawHTTPClient in
            let c = try RawHTTPClient(port: port)
            c.send(get("/waits"))
            return c
        }
        defer { waiting.close() }
        let deadline = ContinuousClock.now + .seconds(30)
        while seen.alive(tag: "waits") == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        await server?.shutdown(gracePeriod: .milliseconds(100))
        server = nil
        try await Task.sleep(for: .milliseconds(300))
        #expect(seen.alive(tag: "waits") == 1, "the loop went while a handler on it was still waiting")
        // The handler's next step is enqueued on the stopped loop and never runs; were the
        // loop freed, this is where it would be used after free.
        release.store(true, ordering: .releasing)
        try await Task.sleep(for: .milliseconds(100))

        // A second server whose handlers all finished: its loop goes once it stopped.
        var second: HTTPServer? = try TestHTTPServer.start(router: router) { $0.eventLoops = 1 }
        #expect(try await getOnce("/quick", port: second!.port)?.status == 200)
        await second?.shutdown(gracePeriod: .milliseconds(100))
        second = nil
        while seen.alive(tag: "quick") > 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(seen.alive(tag: "quick") == 1, "a stopped loop with nothing pending was kept") // the first server's stays
    }

    /// `GET path` on a connection of its own.
    private func getOnce(_ path: String, port: Int) async throws -> RawHTTPClient.RawResponse? {
        try await runBlocking {
            let c = try RawHTTPClient(port: port)
            defer { c.close() }
            c.send(get(path))
            return c.readResponse()
        }
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
