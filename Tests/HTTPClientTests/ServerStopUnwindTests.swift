import BFFTesting
import Foundation
import Synchronization
import HTTPClient
import HTTPCore
import Testing

/// A handler still waiting on its upstream when the server's grace period runs out: stopping
/// the I/O thread fails the upstream request, and the handler must then run its error path
/// (where the FHIR proxy records the PHI access audit entry), not stay suspended for ever.
@Suite("HTTPClient when the server stops")
struct ServerStopUnwindTests {
    @Test func aHandlerWaitingOnItsUpstreamRunsItsErrorPathWhenTheServerStops() async throws {
        let asked = Gate()
        let upstream = try ScriptedServer { connection in
            _ = connection.readRequest()
            asked.open()
            _ = connection.waitForPeerClose(seconds: 30) // never answers
        }
        let client = HTTPClient()
        let outcome = Mutex<String?>(nil)
        var router = Router()
        router.get("/via") { _ in
            do {
                _ = try await client.execute(HTTPClientRequest(url: upstream.baseURL + "/data"))
                outcome.withLock { $0 = "answered" }
            } catch {
                outcome.withLock { $0 = "failed" } // what the proxy's audit entry stands for
            }
            return Response(status: .ok, contentType: "text/plain", body: Array("late".utf8))
        }
        let server = try TestHTTPServer.start(router: router)
        let port = server.port
        let request = Task {
            try await runBlocking {
                let connection = try RawHTTPClient(port: port)
                defer { connection.close() }
                _ = connection.send("GET /via HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return connection.readResponse()
            }
        }
        #expect(await asked.opened(within: 60), "the handler reached the upstream")
        await server.shutdown(gracePeriod: .milliseconds(100))
        // By the time shutdown returns, the handler has seen its request fail.
        #expect(outcome.withLock { $0 } == "failed")
        #expect(try await request.value?.status == nil, "the client's connection closed without an answer")
        withExtendedLifetime(client) {}
    }
}
