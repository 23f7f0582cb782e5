import BFFTesting
import Foundation
@testable import HTTPCore
import Testing

/// The server over real sockets: connection reuse, pipelining, closing rules, refusals, HEAD.
@Suite("live server: connections")
struct ServerLiveTests {
    @Test("keep-alive: several requests on one connection")
    func keepAlive() async throws {
        try await withLiveServer { server in
            let port = server.port
            let texts = try await runBlocking { () throws -> [String?] in
                let c = try RawHTTPClient(port: port)
                var texts: [String?] = []
                for i in 1...5 {
                    c.send(get("/fast?n=\(i)"))
                    texts.append(c.readResponse()?.text)
                }
                c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody")
                texts.append(c.readResponse()?.text)
                return texts
            }
            #expect(texts == ["fast n=1", "fast n=2", "fast n=3", "fast n=4", "fast n=5", "body"])
        }
    }

    @Test("pipelining: 3 requests in one write, a slow one between fast ones, answered in order")
    func pipelining() async throws {
        try await withLiveServer { server in
            let port = server.port
            let responses = try await runBlocking { () throws -> [RawHTTPClient.RawResponse?] in
                let c = try RawHTTPClient(port: port)
                c.send(get("/fast?n=1") + get("/slow?n=2") + get("/fast?n=3"))
                return [c.readResponse(), c.readResponse(), c.readResponse()]
            }
            #expect(responses.map { $0?.text } == ["fast n=1", "slow n=2", "fast n=3"])
            #expect(responses.allSatisfy { $0?["Connection"] == nil && $0?["Date"] != nil })
        }
    }

    @Test("Connection: close is honoured: the response says so and the server closes")
    func connectionClose() async throws {
        try await withLiveServer { server in
            let port = server.port
            let (response, closed) = try await runBlocking { () throws -> (RawHTTPClient.RawResponse?, Bool) in
                let c = try RawHTTPClient(port: port)
                c.send(get("/fast", "Connection: close\r\n"))
                return (c.readResponse(), c.isClosedByPeer(timeout: 5))
            }
            #expect(response?.text == "fast" && response?["Connection"] == "close")
            #expect(closed)
        }
    }

    @Test("HTTP/1.0 closes by default, and stays open with Connection: keep-alive")
    func http10() async throws {
        try await withLiveServer { server in
            let port = server.port
            let (plain, plainClosed, kept, keptOpen) = try await runBlocking { () throws -> (RawHTTPClient.RawResponse?, Bool, RawHTTPClient.RawResponse?, Bool) in
                let a = try RawHTTPClient(port: port)
                a.send("GET /fast HTTP/1.0\r\n\r\n")
                let plain = a.readResponse()
                let plainClosed = a.isClosedByPeer(timeout: 5)
                let b = try RawHTTPClient(port: port)
                b.send("GET /fast HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                let kept = b.readResponse()
                b.send("GET /fast?again HTTP/1.0\r\n\r\n")
                return (plain, plainClosed, kept, b.readResponse()?.text == "fast again")
            }
            #expect(plain?.status == 200 && plain?["Connection"] == "close" && plainClosed)
            #expect(kept?["Connection"] == "keep-alive" && keptOpen)
        }
    }

    @Test("a smuggling attempt (Content-Length with Transfer-Encoding) gets 400, and nothing after it is answered")
    func smuggling() async throws {
        try await withLiveServer { server in
            let port = server.port
            let (response, rest) = try await runBlocking { () throws -> (RawHTTPClient.RawResponse?, [UInt8]) in
                let c = try RawHTTPClient(port: port)
                c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get("/fast?smuggled"))
                return (c.readResponse(), c.readUntilClose(timeout: 5))
            }
            #expect(response?.status == 400)
            #expect(response?["Content-Type"] == "application/problem+json" && response?["Connection"] == "close")
            #expect(rest.isEmpty, "bytes after the 400: \(String(decoding: rest, as: UTF8.self))")
        }
    }

    @Test("an upgrade attempt (h2c, as curl --http2 sends) gets its answer over HTTP/1.1, then the server closes; a request behind it is not answered")
    func upgradeIgnored() async throws {
        try await withLiveServer { server in
            let port = server.port
            let (response, rest) = try await runBlocking { () throws -> (RawHTTPClient.RawResponse?, [UInt8]) in
                let c = try RawHTTPClient(port: port)
                c.send(get("/fast", "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n")
                       + get("/fast?smuggled"))
                return (c.readResponse(), c.readUntilClose(timeout: 5))
            }
            #expect(response?.status == 200 && response?.text == "fast" && response?["Connection"] == "close")
            #expect(response?["Upgrade"] == nil)
            #expect(rest.isEmpty, "bytes after the answer: \(String(decoding: rest, as: UTF8.self))")
        }
    }

    @Test("HEAD gets the headers of GET and no body")
    func head() async throws {
        try await withLiveServer { server in
            let port = server.port
            let (head, streamHead, next, leftover) = try await runBlocking {
                () throws -> (RawHTTPClient.RawResponse?, RawHTTPClient.RawResponse?, RawHTTPClient.RawResponse?, [UInt8]) in
                let c = try RawHTTPClient(port: port)
                c.send("HEAD /fast HTTP/1.1\r\nHost: t\r\n\r\n")
                let head = c.readResponse(isHead: true)
                c.send("HEAD /stream HTTP/1.1\r\nHost: t\r\n\r\n")
                let streamHead = c.readResponse(isHead: true)
                c.send(get("/fast?after"))
                let next = c.readResponse()
                return (head, streamHead, next, c.pending)
            }
            #expect(head?.status == 200 && head?["Content-Length"] == "4" && head?["Content-Type"] == "text/plain; charset=utf-8")
            #expect(streamHead?.status == 200 && streamHead?["Content-Type"] == "application/octet-stream")
            // Had a body followed either HEAD response, it would stand where this status line is.
            #expect(next?.status == 200 && next?.text == "fast after")
            #expect(leftover.isEmpty)
        }
    }

    @Test("Expect: 100-continue gets the interim response, then the final one")
    func expectContinue() async throws {
        try await withLiveServer { server in
            let port = server.port
            let (interim, final) = try await runBlocking { () throws -> (RawHTTPClient.RawResponse?, RawHTTPClient.RawResponse?) in
                let c = try RawHTTPClient(port: port)
                c.send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
                let interim = c.readResponse(timeout: 5)
                c.send("hello")
                return (interim, c.readResponse())
            }
            #expect(interim?.status == 100)
            #expect(final?.status == 200 && final?.text == "hello")
        }
    }

    @Test("Expect: 100-continue from an HTTP/1.0 client gets no interim response, only the final one")
    func expectContinueHTTP10() async throws {
        try await withLiveServer { server in
            let port = server.port
            let received = try await runBlocking { () throws -> [UInt8] in
                let c = try RawHTTPClient(port: port)
                c.send("POST /echo HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello")
                return c.readUntilClose() // HTTP/1.0 without keep-alive: the server closes after its answer
            }
            let text = String(decoding: received, as: UTF8.self)
            // The status line says the highest version the server implements (RFC 9110 §2.5).
            #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n") && text.hasSuffix("\r\n\r\nhello"), "\(text)")
        }
    }
}

@Suite("live server: start-up")
struct ServerStartTests {
    @Test("an address that cannot be looked up fails start() with getaddrinfo's own words, not errno's 'Unknown error'")
    func unresolvableHost() {
        var configuration = ServerConfiguration()
        configuration.host = "999.1.1.1"
        configuration.port = 1
        let server = HTTPServer(configuration: configuration, application: HTTPApplication(router: Router()))
        do {
            try server.start()
            Issue.record("started on 999.1.1.1")
        } catch {
            #expect(error.description.hasPrefix("getaddrinfo(999.1.1.1) failed: "), "\(error)")
            #expect(!error.description.contains("Unknown error"), "\(error)")
        }
    }
}
