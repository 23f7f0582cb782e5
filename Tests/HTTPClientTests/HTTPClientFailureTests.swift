import BFFTesting
import Foundation
import HTTPClient
import Synchronization
import Testing

@Suite("HTTPClient: failures")
struct HTTPClientFailureTests {
    enum Mode: String, CaseIterable, Sendable { case buffered, streaming }

    /// Runs `request` in `mode` and returns the body, or throws the error (for streaming, the
    /// head must have arrived before it).
    static func run(_ client: HTTPClient, _ request: HTTPClientRequest, _ mode: Mode) async throws -> [UInt8] {
        switch mode {
        case .buffered:
            return try await client.execute(request).body
        case .streaming:
            let response = try await client.stream(request)
            #expect(response.status == 200)
            var received: [UInt8] = []
            for try await chunk in response.body { received += chunk }
            return received
        }
    }

    @Test func connectionRefusedFailsFastAsConnectFailure() async throws {
        var configuration = HTTPClient.Configuration()
        configuration.connectTimeout = .seconds(120) // so that only a refusal ends it soon
        let client = HTTPClient(configuration: configuration)
        let started = ContinuousClock.now
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(try LoopbackSocket.unusedPort())/x"))
        }
        #expect(error?.isConnectFailure == true)
        #expect(ContinuousClock.now - started < .seconds(60)) // refused, not timed out; room for a loaded machine
    }

    @Test(arguments: Mode.allCases)
    func silentServerTimesOutWithinTheReadTimeout(mode: Mode) async throws {
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            _ = connection.waitForPeerClose(seconds: 90) // never answers
        }
        var configuration = HTTPClient.Configuration()
        configuration.readTimeout = .milliseconds(400)
        configuration.connectTimeout = .seconds(30) // so that a read timeout counted from the wrong clock shows
        let client = HTTPClient(configuration: configuration)
        let started = ContinuousClock.now
        let error = await #expect(throws: HTTPClientError.self) {
            try await Self.run(client, HTTPClientRequest(url: server.baseURL + "/slow"), mode)
        }
        let elapsed = ContinuousClock.now - started
        #expect(error?.isTimeout == true)
        #expect(elapsed >= .milliseconds(380))
        // 0.4 s configured. Below the 30 s default (and the 30 s connect timeout): a client that
        // falls back to either cannot finish sooner than 30 s, so it fails; the rest is room for
        // this task to resume late on a loaded machine.
        #expect(elapsed < .seconds(28))
    }

    @Test(arguments: Mode.allCases)
    func bodyThatStallsTimesOut(mode: Mode) async throws {
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
            _ = connection.waitForPeerClose(seconds: 90)
        }
        var configuration = HTTPClient.Configuration()
        configuration.readTimeout = .milliseconds(400)
        configuration.connectTimeout = .seconds(30) // so that a read timeout counted from the wrong clock shows
        let client = HTTPClient(configuration: configuration)
        let started = ContinuousClock.now
        let error = await #expect(throws: HTTPClientError.self) {
            try await Self.run(client, HTTPClientRequest(url: server.baseURL + "/"), mode)
        }
        #expect(error?.isTimeout == true)
        #expect(ContinuousClock.now - started < .seconds(28)) // as above: below the 30 s default read timeout
    }

    /// An upstream that trickles its answer, a byte well within the read timeout each time,
    /// holds a buffered request (a sign-in's token exchange, a JWKS fetch), or a streamed one
    /// whose body is collected whole (a small FHIR read, passed on only at its end), no longer
    /// than the total timeout; a streamed body read piece by piece, which may be large, is
    /// not cut by it.
    @Test(arguments: ["buffered", "collected", "streamed"])
    func tricklingAnswerEndsAtTheTotalTimeoutUnlessStreamed(mode: String) async throws {
        // Streamed: 5 s in all, a byte every 0.1 s. Read whole: 30 s, so that a test task
        // resuming late on a loaded machine still asks for the body before it has all come
        // (a body that has, however slowly, is whole); the timeout ends it at 1 s, and the
        // server's next write fails.
        let body = String(repeating: "x", count: mode == "streamed" ? 50 : 300)
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            guard connection.write("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n") else { return }
            for byte in body.utf8 {
                Thread.sleep(forTimeInterval: 0.1)
                guard connection.write([byte]) else { return }
            }
        }
        var configuration = HTTPClient.Configuration()
        configuration.readTimeout = .seconds(20) // never reached between bytes
        // Streamed: the head, sent at once, has 3 s even on a loaded machine; the body takes 5.
        configuration.totalTimeout = mode == "streamed" ? .seconds(3) : .seconds(1)
        let client = HTTPClient(configuration: configuration)
        let request = HTTPClientRequest(url: server.baseURL + "/")
        if mode == "streamed" {
            #expect(try await Self.run(client, request, .streaming) == Array(body.utf8))
            return
        }
        let error = await #expect(throws: HTTPClientError.self) {
            if mode == "buffered" { _ = try await client.execute(request) } else { _ = try await client.stream(request).body.collect() }
        }
        #expect(error?.isTimeout == true, "\(String(reflecting: error))")
        // Without the total timeout the trickle ends after 30 s with the whole body, no error.
        #expect(error.map { "\($0)" }?.contains("answer was not complete within the total timeout (1 s)") == true, "\(String(reflecting: error))")
    }

    /// A response head trickled a byte at a time holds a streamed request no longer than the
    /// total timeout either: nothing is passed on before the head.
    @Test func tricklingHeadEndsAtTheTotalTimeout() async throws {
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            for byte in "HTTP/1.1 200 OK\r\nX-Padding: \(String(repeating: "p", count: 40))\r\nContent-Length: 2\r\n\r\nok".utf8 {
                Thread.sleep(forTimeInterval: 0.1)
                guard connection.write([byte]) else { return }
            }
        }
        var configuration = HTTPClient.Configuration()
        configuration.readTimeout = .seconds(20) // never reached between bytes
        configuration.totalTimeout = .seconds(1)
        let client = HTTPClient(configuration: configuration)
        let error = await #expect(throws: HTTPClientError.self) { _ = try await client.stream(HTTPClientRequest(url: server.baseURL + "/")) }
        #expect(error?.isTimeout == true, "\(String(reflecting: error))")
        #expect(error.map { "\($0)" }?.contains("response head was not complete within the total timeout (1 s)") == true, "\(String(reflecting: error))")
    }

    @Test(arguments: Mode.allCases)
    func contentLengthNotReachedIsAnErrorNotAShortBody(mode: Mode) async throws {
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
        } // the script returns and the connection closes
        let error = await #expect(throws: HTTPClientError.self) {
            try await Self.run(HTTPClient(), HTTPClientRequest(url: server.baseURL + "/"), mode)
        }
        #expect(error?.isTruncated == true)
    }

    @Test(arguments: Mode.allCases)
    func unterminatedChunkedBodyIsAnError(mode: Mode) async throws {
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        }
        let error = await #expect(throws: HTTPClientError.self) {
            try await Self.run(HTTPClient(), HTTPClientRequest(url: server.baseURL + "/"), mode)
        }
        #expect(error?.isTruncated == true)
    }

    /// A body that only the connection's end delimits is whole only when the connection ends
    /// cleanly (FIN); a reset cuts it short.
    /// The reset must come after the client has read the head: a reset that arrives first can
    /// take the unread bytes with it, and the client sees a reset, not a cut body. Streaming,
    /// the test opens `headRead` once the head is in; buffered, nothing shows it, so the server
    /// waits 2 s (the client's own thread reads at once; this is room for a loaded machine).
    @Test(arguments: Mode.allCases)
    func closeDelimitedBodyCutByAResetIsTruncated(mode: Mode) async throws {
        let headRead = Gate()
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\npart of it")
            switch mode {
            case .streaming: _ = headRead.wait(seconds: 60) // no-hang limit
            case .buffered: Thread.sleep(forTimeInterval: 2)
            }
            var reset = linger(l_onoff: 1, l_linger: 0) // close now sends RST, not FIN
            setsockopt(connection.fd, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
        }
        let client = HTTPClient()
        let request = HTTPClientRequest(url: server.baseURL + "/")
        let error = await #expect(throws: HTTPClientError.self) {
            switch mode {
            case .buffered:
                _ = try await client.execute(request)
            case .streaming:
                let response = try await client.stream(request)
                headRead.open()
                #expect(response.status == 200)
                for try await _ in response.body {}
            }
        }
        #expect(error?.isTruncated == true, "\(String(reflecting: error))")
    }

    /// An HTTP/1.0 response with Transfer-Encoding has faulty framing (RFC 9112 §6.1): it is
    /// refused as malformed (502 at the proxy), and its connection is never used again.
    @Test(arguments: Mode.allCases)
    func http10ResponseWithTransferEncodingIsRefused(mode: Mode) async throws {
        let server = try ScriptedServer.responding { _ in "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n" }
        let client = HTTPClient()
        for path in ["/first", "/second"] {
            let error = await #expect(throws: HTTPClientError.self) {
                try await Self.run(client, HTTPClientRequest(url: server.baseURL + path), mode)
            }
            #expect(error?.failure == "malformed response", "\(String(reflecting: error))")
        }
        #expect(server.requests.map(\.target) == ["/first", "/second"])
        #expect(server.connectionCount == 2)
    }

    @Test func closeDelimitedBodyEndsCleanly() async throws {
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
        }
        for mode in Mode.allCases {
            #expect(try await Self.run(HTTPClient(), HTTPClientRequest(url: server.baseURL + "/"), mode) == Array("all of it".utf8))
        }
    }

    @Test(arguments: [
        "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + String(repeating: "x", count: 5000),
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + String(repeating: "3e8\r\n" + String(repeating: "x", count: 1000) + "\r\n", count: 5) + "0\r\n\r\n",
    ])
    func bufferedBodyOverTheLimitIsRefused(response: String) async throws {
        let server = try ScriptedServer.responding { _ in response }
        var configuration = HTTPClient.Configuration()
        configuration.maxResponseBodyBytes = 1000
        let error = await #expect(throws: HTTPClientError.self) {
            try await HTTPClient(configuration: configuration).execute(HTTPClientRequest(url: server.baseURL + "/"))
        }
        #expect(error?.isBodyTooLarge == true)
    }

    @Test func collectStopsAtItsLimit() async throws {
        let server = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + String(repeating: "x", count: 5000) }
        let response = try await HTTPClient().stream(HTTPClientRequest(url: server.baseURL + "/"))
        let error = await #expect(throws: HTTPClientError.self) { try await response.body.collect(limit: 4999) }
        #expect(error?.isBodyTooLarge == true)
    }

    @Test(arguments: [
        HTTPClientRequest(url: "/x", headers: [("X-A", "1\r\nX-Injected: 1")]),
        HTTPClientRequest(url: "/x", headers: [("X-A\r\nX-Injected", "1")]),
        HTTPClientRequest(url: "/x", headers: [("Bad Name", "1")]),
        HTTPClientRequest(method: "GET /admin HTTP/1.1\r\nX:", url: "/x"),
        HTTPClientRequest(url: "/x HTTP/1.1\r\nX-Injected: 1\r\n"),
    ])
    func requestsThatWouldSplitAreRefusedBeforeSending(request: HTTPClientRequest) async throws {
        let server = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" }
        var request = request
        request.url = server.baseURL + request.url
        let error = await #expect(throws: HTTPClientError.self) { try await HTTPClient().execute(request) }
        #expect(error?.isInvalidRequest == true)
        #expect(server.connectionCount == 0)
    }

    @Test(arguments: ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/", "dict://127.0.0.1/x", "not a url"])
    func onlyHTTPAndHTTPSAreFetched(url: String) async throws {
        let error = await #expect(throws: HTTPClientError.self) { try await HTTPClient().execute(HTTPClientRequest(url: url)) }
        #expect(error?.isInvalidRequest == true)
    }

    @Test func cancellingTheTaskCancelsTheRequest() async throws {
        let requestArrived = Gate()
        let peerClosed = Gate()
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            requestArrived.open()
            if connection.waitForPeerClose(seconds: 120) { peerClosed.open() } // never answers
        }
        let client = HTTPClient()
        let request = Task { try await client.execute(HTTPClientRequest(url: server.baseURL + "/")) }
        #expect(await requestArrived.opened(within: 60)) // cancel a request in flight, not one not yet sent
        request.cancel()
        let error = await #expect(throws: HTTPClientError.self) { try await request.value }
        // Only the cancellation ends it early: otherwise the 30 s read timeout would (isTimeout).
        #expect(error?.isCancelled == true)
        #expect(await peerClosed.opened(within: 60), "the cancelled request's connection stayed open")
        withExtendedLifetime(client) {} // a client that shut down would also close it
    }

    @Test func anAlreadyCancelledTaskSendsNothing() async throws {
        let server = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" }
        let client = HTTPClient()
        let request = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await client.execute(HTTPClientRequest(url: server.baseURL + "/"))
        }
        let error = await #expect(throws: HTTPClientError.self) { try await request.value }
        #expect(error?.isCancelled == true)
        #expect(server.requests.isEmpty)
    }

    /// The detail may name the host (useful to operators), never the path, query or headers.
    @Test func errorsNeverContainTheURLOrHeaders() async throws {
        let secret = "SECRET-abc123"
        let truncating = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
        }
        let urls = ["http://127.0.0.1:\(try LoopbackSocket.unusedPort())/fhir/Patient?access_token=\(secret)",
                    truncating.baseURL + "/fhir/Patient?access_token=\(secret)",
                    "http://no-such-host.invalid/?code=\(secret)"]
        for url in urls {
            let error = await #expect(throws: HTTPClientError.self) {
                try await HTTPClient().execute(HTTPClientRequest(url: url, headers: [("Authorization", "Bearer " + secret)]))
            }
            let texts = [error.map { "\($0)" }, error.map { String(reflecting: $0) }, error?.message].compactMap { $0 }
            #expect(!texts.isEmpty)
            for text in texts {
                #expect(!text.contains(secret), "\(text)")
                #expect(!text.contains("access_token"), "\(text)")
            }
        }
    }
}
