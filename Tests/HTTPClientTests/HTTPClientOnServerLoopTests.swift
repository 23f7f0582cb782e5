import BFFTesting
import Foundation
import HTTPClient
import HTTPCore
import Testing

/// Requests made by a server's request handlers run on the handler's own I/O thread, with a
/// connection cache per thread (the FHIR proxy's path); these tests pin down what that
/// means for the upstream.
@Suite("HTTPClient inside request handlers")
struct HTTPClientOnServerLoopTests {
    /// Starts a server whose `GET /via` fetches `upstream` with `client` and answers with
    /// the upstream's body, noting in `seen` the I/O thread it ran on.
    private func startProxy(to upstream: String, client: HTTPClient, seen: SeenEventLoops? = nil) throws -> HTTPServer {
        var router = Router()
        router.get("/via") { _ in
            seen?.addCurrent()
            let response = try await client.execute(HTTPClientRequest(url: upstream + "/data"))
            return Response(status: HTTPStatus(code: response.status), contentType: "text/plain", body: response.body)
        }
        return try TestHTTPServer.start(router: router)
    }

    /// `GET /via` on a connection of its own.
    private func fetchVia(port: Int) async throws -> RawHTTPClient.RawResponse? {
        try await runBlocking {
            let connection = try RawHTTPClient(port: port)
            defer { connection.close() }
            guard connection.send("GET /via HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") else { return nil }
            return connection.readResponse()
        }
    }

    @Test func handlersReuseTheirUpstreamConnections() async throws {
        let upstream = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndata" }
        let client = HTTPClient()
        let server = try startProxy(to: upstream.baseURL, client: client)
        for _ in 0..<20 {
            let reply = try await fetchVia(port: server.port)
            #expect(reply?.status == 200)
            #expect(reply?.text == "data")
        }
        // Twenty requests from short client connections, spread over the server's two I/O
        // threads: at most one upstream connection per thread.
        #expect(upstream.connectionCount >= 1 && upstream.connectionCount <= 2)
        await server.shutdown(gracePeriod: .milliseconds(200))
        withExtendedLifetime(client) {}
    }

    @Test func stoppingTheServerClosesTheUpstreamConnectionsItsHandlersOpened() async throws {
        let closed = Counter()
        let upstream = try ScriptedServer { connection in
            while let _ = connection.readRequest() {
                guard connection.write("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndata") else { return }
            }
            closed.increment() // the client closed its end
        }
        let client = HTTPClient() // outlives the server: its own cache must not keep them
        let server = try startProxy(to: upstream.baseURL, client: client)
        let reply = try await fetchVia(port: server.port)
        #expect(reply?.text == "data")
        #expect(upstream.connectionCount == 1)
        #expect(closed.current == 0, "the upstream connection is kept alive while the server runs")

        await server.shutdown(gracePeriod: .milliseconds(200))
        let deadline = ContinuousClock.now + .seconds(30)
        while closed.current < 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(closed.current == 1, "the upstream connection stayed open after the server stopped")
        withExtendedLifetime(client) {}
    }

    /// An EHR sees at most `maxConnectionsPerHost` connections from the server's I/O threads
    /// together, not that many from each.
    @Test func theServersThreadsShareTheConnectionLimit() async throws {
        let upstream = try ScriptedServer { connection in
            while connection.readRequest() != nil {
                Thread.sleep(forTimeInterval: 0.05) // requests pile up behind a slow answer
                guard connection.write("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndata") else { return }
            }
        }
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 4
        let client = HTTPClient(configuration: configuration)
        // One of a server's four I/O threads (a loop that knows it is one of four).
        let loop = try EventLoop(application: nil, groupSize: 4)
        loop.start(name: "test-io")
        defer { loop.execute { loop.stop() } }
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask(executorPreference: loop) {
                    try await client.execute(HTTPClientRequest(url: upstream.baseURL + "/data")).status
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 8))
        #expect(upstream.connectionCount == 1, "one of four threads may hold a quarter of the 4 connections")
        withExtendedLifetime(client) {}
    }

    @Test func aStoppedServersThreadsAreNotKeptByTheClient() async throws {
        let upstream = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndata" }
        let client = HTTPClient() // lives on, as a process's client does across servers
        let seen = SeenEventLoops()
        var server: HTTPServer? = try startProxy(to: upstream.baseURL, client: client, seen: seen)
        let reply = try await fetchVia(port: server!.port)
        #expect(reply?.text == "data")
        #expect(seen.alive() == 1)

        await server?.shutdown(gracePeriod: .milliseconds(200))
        server = nil
        let deadline = ContinuousClock.now + .seconds(30)
        while seen.alive() > 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(seen.alive() == 0, "the client still holds the stopped server's I/O thread (its epoll set, its buffers)")
        withExtendedLifetime(client) {}
    }
}
