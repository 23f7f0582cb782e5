import BFFTesting
import Foundation
import Synchronization
@testable import HTTPCore
import Testing

/// Streamed responses over real sockets: large chunked bodies arrive whole and in order; a
/// producer that fails never lets a truncated body look complete.
@Suite("live server: streamed responses")
struct ServerStreamingLiveTests {
    @Test("a 4 MiB chunked stream written in 64 KiB pieces arrives whole, and the connection stays usable")
    func streamArrivesWhole() async throws {
        try await withLiveServer { server in
            let port = server.port
            let (response, next) = try await runBlocking { () throws -> (RawHTTPClient.RawResponse?, String?) in
                let c = try RawHTTPClient(port: port, timeout: 20)
                c.send(get("/stream"))
                let response = c.readResponse()
                c.send(get("/fast?after"))
                return (response, c.readResponse()?.text)
            }
            #expect(response?.status == 200)
            #expect(response?["Transfer-Encoding"] == "chunked" && response?["Content-Length"] == nil)
            #expect(response?.complete == true)
            #expect(response?.body.count == LiveRoutes.pieces * LiveRoutes.piece)
            #expect(response.map { $0.body.count == LiveRoutes.expectedStream.count && $0.body.isSlice(of: LiveRoutes.expectedStream) } == true, "the streamed bytes differ")
            #expect(next == "fast after")
        }
    }

    @Test("a streamed 204 or 304 (a proxied EHR answer with its Content-Length) goes out with no Content-Length, and the connection stays usable; a HEAD's 200 keeps its length")
    func bodylessStatusesCarryNoLength() async throws {
        var router = Router()
        for (path, status) in [("/no-content", HTTPStatus.noContent), ("/not-modified", HTTPStatus(code: 304)), ("/ok", .ok)] {
            router.on("GET", path) { _ in Response(status: status, body: .stream(length: 5) { writer in try await writer.write(Array("abcde".utf8)) }) }
        }
        let server = try TestHTTPServer.start(router: router)
        let port = server.port
        let answers = try await runBlocking { () throws -> [RawHTTPClient.RawResponse?] in
            let c = try RawHTTPClient(port: port, timeout: 10)
            c.send(get("/no-content"))
            let noContent = c.readResponse()
            c.send(get("/not-modified"))
            let notModified = c.readResponse()
            c.send("HEAD /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let head = c.readResponse(isHead: true)
            c.send(get("/ok"))
            return [noContent, notModified, head, c.readResponse()]
        }
        await server.shutdown(gracePeriod: .milliseconds(200))
        #expect(answers.map { $0?.status } == [204, 304, 200, 200])
        #expect(answers[0]?["Content-Length"] == nil && answers[1]?["Content-Length"] == nil, "\(answers.map { $0?.headers })")
        #expect(answers[2]?["Content-Length"] == "5")
        #expect(answers[3]?.text == "abcde")
    }

    @Test("a body writer kept past its response cannot write into the next response on the connection")
    func writerBoundToItsResponse() async throws {
        let kept = Mutex<(any BodyWriter)?>(nil)
        let refused = Counter()
        var router = Router()
        router.get("/first") { _ in
            Response(status: .ok, headers: ["Content-Type": "text/plain"], body: .stream(length: nil) { writer in
                try await writer.write(Array("first".utf8))
                kept.withLock { $0 = writer } // wrongly kept past this response
            })
        }
        router.get("/second") { _ in
            Response(status: .ok, headers: ["Content-Type": "text/plain"], body: .stream(length: nil) { writer in
                try await writer.write(Array("second:".utf8))
                do { try await kept.withLock { $0 }?.write(Array("LEAKED".utf8)) } catch { refused.increment() }
                try await writer.write(Array("end".utf8))
            })
        }
        let server = try TestHTTPServer.start(router: router)
        let port = server.port
        let bodies = try await runBlocking { () throws -> [String?] in
            let c = try RawHTTPClient(port: port, timeout: 10)
            c.send(get("/first"))
            let first = c.readResponse()?.text
            c.send(get("/second"))
            return [first, c.readResponse()?.text]
        }
        await server.shutdown(gracePeriod: .milliseconds(200))
        #expect(bodies == ["first", "second:end"])
        #expect(refused.current == 1, "the kept writer's write was not refused")
    }

    @Test("a slow reader still gets every byte (the producer waits for the socket)")
    func slowReader() async throws {
        try await withLiveServer { server in
            let port = server.port
            let body = try await runBlocking { () throws -> [UInt8] in
                let c = try RawHTTPClient(port: port, timeout: 20)
                c.send(get("/stream", "Connection: close\r\n"))
                Thread.sleep(forTimeInterval: 0.5)  // let the server fill its buffers and wait
                return c.readResponse()?.body ?? []
            }
            #expect(body.count == LiveRoutes.expectedStream.count && body.isSlice(of: LiveRoutes.expectedStream))
        }
    }

    @Test("a producer that throws mid-stream: the connection closes without the terminating 0-size chunk")
    func producerFailure() async throws {
        try await withLiveServer { server in
            let port = server.port
            let (response, raw) = try await runBlocking { () throws -> (RawHTTPClient.RawResponse?, [UInt8]) in
                let c = try RawHTTPClient(port: port, timeout: 10)
                c.send(get("/stream?fail=8"))
                let response = c.readResponse()
                let d = try RawHTTPClient(port: port, timeout: 10)
                d.send(get("/stream?fail=2"))
                return (response, d.readUntilClose())
            }
            #expect(response?.status == 200)
            #expect(response?.complete == false, "a failed stream looked complete")
            let received = response?.body ?? []
            #expect(received.count <= 8 * LiveRoutes.piece && received.isSlice(of: LiveRoutes.expectedStream))
            let text = String(decoding: raw, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200 "))
            #expect(!text.hasSuffix("\r\n0\r\n\r\n"), "the terminating chunk was sent")
        }
    }
}
