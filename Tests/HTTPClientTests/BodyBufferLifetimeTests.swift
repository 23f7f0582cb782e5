@testable import HTTPClient
import Foundation
import Testing

/// A transfer and its body buffer hold each other until the transfer ends; every ending
/// must break that hold, or each proxied response would leak its buffers.
@Suite("HTTPClient: body buffers are freed")
struct BodyBufferLifetimeTests {
    @Test("after the body was read to its end")
    func readToTheEnd() async throws {
        let server = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" }
        let client = HTTPClient()
        weak var buffer: BodyBuffer?
        do {
            let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/"))
            buffer = response.body.buffer
            #expect(try await response.body.collect() == Array("hello".utf8))
        }
        #expect(await released { buffer == nil })
    }

    @Test("after the body was dropped half-way")
    func droppedMidBody() async throws {
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
            _ = connection.waitForPeerClose(seconds: 60) // the rest never comes
        }
        let client = HTTPClient()
        weak var buffer: BodyBuffer?
        do {
            let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/"))
            buffer = response.body.buffer
            _ = try await response.body.next()
        } // dropped: the transfer is cancelled on the client's thread
        #expect(await released { buffer == nil })
        withExtendedLifetime(client) {}
    }

    /// Whether `condition` holds within 10 s (the client's thread lets go asynchronously).
    private func released(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<1000 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }
}
