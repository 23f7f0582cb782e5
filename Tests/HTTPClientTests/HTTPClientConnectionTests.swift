import BFFTesting
import Foundation
import HTTPClient
import HTTPCore
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Connections over real sockets: kept-alive connections the upstream closes without a word,
/// upstreams that never answer, plain-http proxies, TLS cut short, and writes to a closed
/// connection.
@Suite("HTTPClient: connections")
struct HTTPClientConnectionTests {
    static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    // MARK: - Kept-alive connections the upstream closes

    /// The upstream closes each connection right after its first response, without
    /// `Connection: close` (as servers and load balancers with a keep-alive limit of one do).
    @Test func connectionClosedAfterItsFirstResponseWithoutNotice() async throws {
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write(Self.ok)
        } // the script returns and the connection closes
        let client = HTTPClient()
        for i in 0..<3 {
            let response = try await client.execute(HTTPClientRequest(url: server.baseURL + "/get/\(i)"))
            #expect(response.body == Array("ok".utf8))
        }
        // A POST may fail here (if it went out on the closed connection), but never goes twice.
        let post = try? await client.execute(HTTPClientRequest(method: "POST", url: server.baseURL + "/post", body: Array("x".utf8)))
        #expect(post == nil || post?.status == 200)
        #expect(server.requests.filter { $0.method == "POST" }.count <= 1)
    }

    /// A server that sends the GET's body to HEAD, late: the HEAD's connection is not reused,
    /// so those bytes are never read as the next request's answer.
    @Test func headConnectionNotReused() async throws {
        let server = try ScriptedServer { connection in
            while let request = connection.readRequest() {
                if request.method == "HEAD" {
                    guard connection.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n") else { return }
                    Thread.sleep(forTimeInterval: 0.3) // after the client has taken the head as the whole response
                    guard connection.write("ok") else { return }
                } else {
                    guard connection.write(Self.ok) else { return }
                }
            }
        }
        let client = HTTPClient()
        #expect(try await client.execute(HTTPClientRequest(method: "HEAD", url: server.baseURL + "/x")).status == 200)
        try await Task.sleep(for: .milliseconds(100))
        let get = try await client.execute(HTTPClientRequest(url: server.baseURL + "/y"))
        #expect(get.status == 200 && get.body == Array("ok".utf8))
        #expect(server.connectionCount == 2)
    }

    /// A 204 or 304 whose fields frame a body, from a server that sends that body late (here:
    /// in front of its answer to the next request on that connection, whenever that comes):
    /// the connection is not reused, so the body never becomes the next request's answer (which
    /// would fail, and go again on a new connection). A 304 that frames none keeps its connection.
    @Test(arguments: [
        ("HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n", "ok", 2),
        ("HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\n\r\n", "ok", 2),
        ("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", "2\r\nok\r\n0\r\n\r\n", 2),
        ("HTTP/1.1 304 Not Modified\r\nETag: \"1\"\r\n\r\n", "", 1),
    ])
    func bodilessStatusFramingABodyEndsItsConnection(head: String, lateBody: String, connections: Int) async throws {
        let server = try ScriptedServer { connection in
            var late = ""
            while let request = connection.readRequest() {
                if request.target == "/first" {
                    guard connection.write(head) else { return }
                    late = lateBody
                } else {
                    guard connection.write(late + Self.ok) else { return }
                    late = ""
                }
            }
        }
        let client = HTTPClient()
        #expect(try await client.execute(HTTPClientRequest(url: server.baseURL + "/first")).body.isEmpty)
        let get = try await client.execute(HTTPClientRequest(url: server.baseURL + "/second"))
        #expect(get.status == 200 && get.body == Array("ok".utf8))
        #expect(server.requests.filter { $0.target == "/second" }.count == 1, "the late body was read as the answer")
        #expect(server.connectionCount == connections)
    }

    /// The upstream reads the second request on a kept-alive connection, then closes it
    /// without answering: the race a client reusing a connection cannot avoid. A GET goes
    /// again on a fresh connection, once; a POST (not idempotent) fails and is never resent.
    @Test(arguments: ["GET", "POST"])
    func reusedConnectionClosedAfterReadingTheRequest(method: String) async throws {
        var configuration = HTTPClient.Configuration()
        configuration.maxIdleForUnrepeatable = .seconds(600) // the POST takes the reused connection however late this task resumes
        let connections = Numbering()
        let server = try ScriptedServer { connection in
            let isFirst = connections.next() == 0
            guard connection.readRequest() != nil else { return }
            if isFirst {
                connection.write(Self.ok)
                _ = connection.readRequest() // then closes without answering
            } else {
                connection.write(Self.ok)
            }
        }
        let client = HTTPClient(configuration: configuration)
        #expect(try await client.execute(HTTPClientRequest(url: server.baseURL + "/first")).status == 200)
        let second = HTTPClientRequest(method: method, url: server.baseURL + "/second", body: method == "POST" ? Array("x".utf8) : nil)
        if method == "GET" {
            let response = try await client.execute(second)
            #expect(response.body == Array("ok".utf8))
            #expect(server.requests.filter { $0.target == "/second" }.count == 2)
            #expect(server.connectionCount == 2)
        } else {
            let error = await #expect(throws: HTTPClientError.self) { try await client.execute(second) }
            #expect(error?.failure == "closed without an answer", "\(String(reflecting: error))")
            #expect(server.requests.filter { $0.target == "/second" }.count == 1)
            #expect(server.connectionCount == 1)
        }
    }

    /// A POST (a token request, never sent twice) goes on a kept-alive connection only when
    /// it has been idle a moment at most: one idle for seconds may be the one a server with a
    /// 5 s keep-alive timeout is closing just then (with one connection allowed, that one
    /// makes room). A GET, which may go again, still takes it.
    @Test(arguments: [("POST", 8, 2), ("POST", 1, 2), ("GET", 8, 1)])
    func unrepeatableRequestTakesNoConnectionIdleTooLong(method: String, limit: Int, connections: Int) async throws {
        let server = try ScriptedServer { connection in
            while connection.readRequest() != nil {
                guard connection.write(Self.ok) else { return }
            }
        }
        // Short, against a pause twice as long, and each client of its own: a test task that
        // resumes late on a loaded machine only makes the idle times longer.
        func client(maxIdleForUnrepeatable: Duration) -> HTTPClient {
            var configuration = HTTPClient.Configuration()
            configuration.maxConnectionsPerHost = limit
            configuration.maxIdleForUnrepeatable = maxIdleForUnrepeatable
            return HTTPClient(configuration: configuration)
        }
        let patient = client(maxIdleForUnrepeatable: .seconds(600))
        #expect(try await patient.execute(HTTPClientRequest(url: server.baseURL + "/first")).status == 200)
        #expect(try await patient.execute(HTTPClientRequest(method: "POST", url: server.baseURL + "/at-once", body: [1])).status == 200)
        #expect(server.connectionCount == 1, "a POST within its idle limit takes the connection")
        let client = client(maxIdleForUnrepeatable: .milliseconds(500))
        let before = server.connectionCount
        #expect(try await client.execute(HTTPClientRequest(url: server.baseURL + "/first")).status == 200)
        try await Task.sleep(for: .seconds(1))
        let later = HTTPClientRequest(method: method, url: server.baseURL + "/later", body: method == "POST" ? [1] : nil)
        #expect(try await client.execute(later).status == 200)
        #expect(server.connectionCount - before == connections)
    }

    /// An upstream that reads each request and closes without answering: the request fails
    /// as a malformed (empty) response, at once, not after a timeout, and is sent at most
    /// twice (once more only when a reused connection might have been closed just then).
    @Test func upstreamClosingWithoutAnsweringFailsWithoutRetryingForever() async throws {
        let connections = Numbering()
        let server = try ScriptedServer { connection in
            if connections.next() == 0 { // the first connection answers its first request
                guard connection.readRequest() != nil else { return }
                connection.write(Self.ok)
            }
            _ = connection.readRequest() // then closes without answering
        }
        var configuration = HTTPClient.Configuration()
        configuration.readTimeout = .seconds(60) // a client waiting for an answer would time out instead
        let client = HTTPClient(configuration: configuration)
        #expect(try await client.execute(HTTPClientRequest(url: server.baseURL + "/first")).status == 200)

        let onReused = await #expect(throws: HTTPClientError.self) {
            try await client.execute(HTTPClientRequest(url: server.baseURL + "/reused"))
        }
        #expect(onReused?.failure == "closed without an answer", "\(String(reflecting: onReused))")
        #expect((1...2).contains(server.requests.filter { $0.target == "/reused" }.count))

        let onFresh = await #expect(throws: HTTPClientError.self) {
            try await HTTPClient(configuration: configuration).execute(HTTPClientRequest(url: server.baseURL + "/fresh"))
        }
        #expect(onFresh?.failure == "closed without an answer", "\(String(reflecting: onFresh))")
        #expect(server.requests.filter { $0.target == "/fresh" }.count == 1)
    }

    // MARK: - Proxies

    @Test func plainHTTPGoesToTheProxyInAbsoluteFormWithItsCredentials() async throws {
        let proxy = try ScriptedServer.responding { _ in "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nproxied!" }
        let upstreamPort = try LoopbackSocket.unusedPort() // and no name lookup finds the host: only the proxy can answer
        var configuration = HTTPClient.Configuration()
        configuration.proxy = "http://user:p%40ss@127.0.0.1:\(proxy.port)"
        let client = HTTPClient(configuration: configuration)
        let response = try await client.execute(HTTPClientRequest(url: "http://fhir.internal.test:\(upstreamPort)/fhir/Patient?_id=1"))
        #expect(response.body == Array("proxied!".utf8))
        let seen = try #require(proxy.requests.first)
        #expect(seen.method == "GET")
        #expect(seen.target == "http://fhir.internal.test:\(upstreamPort)/fhir/Patient?_id=1")
        #expect(seen.header("Host") == "fhir.internal.test:\(upstreamPort)")
        #expect(seen.header("Proxy-Authorization") == "Basic " + Data("user:p@ss".utf8).base64EncodedString())

        configuration.proxy = "http://127.0.0.1:\(proxy.port)"
        _ = try await HTTPClient(configuration: configuration).execute(HTTPClientRequest(url: "http://fhir.internal.test:\(upstreamPort)/"))
        #expect(proxy.requests.count == 2)
        #expect(proxy.requests.last?.target == "http://fhir.internal.test:\(upstreamPort)/")
        #expect(proxy.requests.last?.header("Proxy-Authorization") == nil)
    }

    /// For https the credentials go in the CONNECT, to the proxy; a refused tunnel fails the
    /// request as a connect failure.
    @Test func httpsGoesThroughAConnectCarryingTheCredentials() async throws {
        let proxy = try ScriptedServer.responding { _ in "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n" }
        var configuration = HTTPClient.Configuration()
        configuration.proxy = "http://user:secret@127.0.0.1:\(proxy.port)"
        let error = await #expect(throws: HTTPClientError.self) {
            try await HTTPClient(configuration: configuration).execute(HTTPClientRequest(url: "https://fhir.example.org/Patient"))
        }
        #expect(error?.isConnectFailure == true, "\(String(reflecting: error))")
        let seen = try #require(proxy.requests.first)
        #expect(seen.method == "CONNECT")
        #expect(seen.target == "fhir.example.org:443")
        #expect(seen.header("Proxy-Authorization") == "Basic " + Data("user:secret".utf8).base64EncodedString())
    }

    /// How a proxy answers a CONNECT it will not open, and what the error must say.
    struct RefusedTunnel: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let answer: String
        /// The proxy closes the connection right after answering (the answer and the FIN
        /// in one segment), rather than waiting for the client to.
        let closes: Bool
        let said: String
    }

    /// A refused tunnel is a connect failure that names the proxy's status, however the
    /// answer ends; an answer that is not HTTP is refused, not taken for a 2xx.
    @Test(arguments: [
        RefusedTunnel(testDescription: "407, then the proxy closes",
                      answer: "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                      closes: true, said: "HTTP 407"),
        RefusedTunnel(testDescription: "407 with lines ending in LF alone",
                      answer: "HTTP/1.1 407 Proxy Authentication Required\nContent-Length: 0\n\n", closes: false, said: "HTTP 407"),
        RefusedTunnel(testDescription: "a four-digit status", answer: "HTTP/1.1 2000 OK\r\n\r\n", closes: false, said: "not HTTP"),
    ])
    func refusedTunnelIsReportedWithTheProxysStatus(_ refused: RefusedTunnel) async throws {
        let proxy = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            if refused.closes {
                var cork: Int32 = 1 // held back until the close, and sent with its FIN
                setsockopt(connection.fd, Int32(IPPROTO_TCP), TCP_CORK, &cork, socklen_t(MemoryLayout<Int32>.size))
                connection.write(refused.answer)
            } else {
                connection.write(refused.answer)
                _ = connection.waitForPeerClose(seconds: 60)
            }
        }
        var configuration = HTTPClient.Configuration()
        configuration.proxy = "http://127.0.0.1:\(proxy.port)"
        configuration.connectTimeout = .seconds(10) // an answer not understood would end in this timeout
        let error = await #expect(throws: HTTPClientError.self) {
            try await HTTPClient(configuration: configuration).execute(HTTPClientRequest(url: "https://fhir.example.org/Patient"))
        }
        #expect(error?.isConnectFailure == true, "\(String(reflecting: error))")
        #expect(error?.message.contains(refused.said) == true, "\(String(reflecting: error))")
        #expect(proxy.requests.first?.method == "CONNECT")
    }

    @Test(arguments: ["socks5://127.0.0.1:1080", "https://127.0.0.1:3128"])
    func unsupportedProxyFailsAndNothingIsSent(proxy: String) async throws {
        let server = try ScriptedServer.responding { _ in Self.ok }
        var configuration = HTTPClient.Configuration()
        configuration.proxy = proxy
        let error = await #expect(throws: HTTPClientError.self) {
            // https: plain http to a loopback host never goes through a proxy.
            try await HTTPClient(configuration: configuration).execute(HTTPClientRequest(url: "https://127.0.0.1:\(server.port)/"))
        }
        #expect(error?.isConnectFailure == true)
        #expect(server.connectionCount == 0) // no fallback to a direct connection
    }

    // MARK: - TLS

    /// A body only the end of the connection delimits is complete when TLS ends with
    /// close_notify, and truncated when the TCP connection ends without it (someone on the
    /// path could have cut it).
    @Test func closeDelimitedBodyOverTLSNeedsCloseNotify() async throws {
        let backend = try ScriptedServer { connection in
            guard let request = connection.readRequest() else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
            connection.write([UInt8](repeating: UInt8(ascii: "a"), count: request.target == "/cut" ? 32 << 20 : 10))
        } // then the script returns: the TLS server sees the end and sends close_notify
        let tls = try TLSTestServer(identity: TestCertificates.localhost)
        tls.forward(to: backend.port)
        var configuration = HTTPClient.Configuration()
        configuration.caCertificatesFile = try TestCertificates.caFile()
        let client = HTTPClient(configuration: configuration)

        let whole = try await client.execute(HTTPClientRequest(url: "https://localhost:\(tls.port)/whole"))
        #expect(whole.body == [UInt8](repeating: UInt8(ascii: "a"), count: 10))

        let cut = try await client.stream(HTTPClientRequest(url: "https://localhost:\(tls.port)/cut"))
        #expect(cut.status == 200)
        // Nobody reads the body yet: the client stops reading once 1 MiB waits, and the TLS
        // server's relay blocks writing to it. Then the TLS server's connections end with
        // TCP shutdowns; the relay, stuck in its write, can send no close_notify. (Were it
        // idle instead, the backend's side ending first would let it send one.)
        try await Task.sleep(for: .seconds(1))
        try tls.present(TestCertificates.localhost)
        let error = await #expect(throws: HTTPClientError.self) { try await cut.body.collect() }
        #expect(error?.isTruncated == true, "\(String(reflecting: error))")
    }

    // MARK: - SIGPIPE

    /// Writing to a connection the upstream has closed raises SIGPIPE unless the writer asks
    /// not to (MSG_NOSIGNAL, or the TLS BIO's own send); by default SIGPIPE ends the process.
    ///
    /// The test process ignores SIGPIPE (TLSTestServer and ConnectProxy set SIG_IGN for the
    /// tests' own servers), which would hide a client that raises it; and restoring SIG_DFL
    /// could kill the whole test run through those servers' writes. So a handler counts the
    /// SIGPIPEs raised on one watched thread instead, harmless for every other thread: an
    /// event loop of the test's own, on which the client runs the requests made from it (as
    /// it does for a server's request handlers). A probe raises one there first, to show the
    /// watch works; an attempt during which SIG_IGN came back (another test starting one of
    /// those servers) proves nothing and is run again.
    @Test func writingToAClosedConnectionRaisesNoSIGPIPE() async throws {
        let loop = try EventLoop(application: nil)
        loop.start(name: "test-loop")
        defer { loop.execute { loop.stop() } }
        await withCheckedContinuation { done in
            loop.execute {
                PipeSignals.watchThisThread()
                done.resume()
            }
        }
        for _ in 0..<5 {
            guard PipeSignals.install() else { continue }
            let before = PipeSignals.count
            await withCheckedContinuation { done in
                loop.execute {
                    PipeSignals.raiseHere()
                    done.resume()
                }
            }
            let probed = PipeSignals.count
            try await largePOSTToAConnectionClosedUnderIt(from: loop)
            let after = PipeSignals.count
            guard PipeSignals.isInstalled else { continue } // SIG_IGN came back meanwhile: inconclusive
            #expect(probed == before + 1, "the SIGPIPE watch does not work: the test proves nothing")
            #expect(after == probed, "the client raised SIGPIPE")
            return
        }
        Issue.record("SIGPIPE was set to SIG_IGN during every attempt: nothing was checked")
    }

    /// A large POST queued behind a GET, on a connection the server closes as it answers
    /// the GET (the answer and the FIN in one segment, so the POST goes out after both): its
    /// first send() draws the peer's reset, its second fails with EPIPE, the case that raises
    /// SIGPIPE. Later connections close at once. Both requests are made from `loop`, so the
    /// client does their I/O on that thread.
    private func largePOSTToAConnectionClosedUnderIt(from loop: EventLoop) async throws {
        let getArrived = Gate()
        let answerGET = Gate()
        let connections = Numbering()
        let server = try ScriptedServer { connection in
            guard connections.next() == 0, connection.readRequest() != nil else { return }
            getArrived.open()
            _ = answerGET.wait(seconds: 60)
            var cork: Int32 = 1 // held back until the close, and sent with its FIN
            setsockopt(connection.fd, Int32(IPPROTO_TCP), TCP_CORK, &cork, socklen_t(MemoryLayout<Int32>.size))
            connection.write(Self.ok)
        }
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 1 // the POST waits for the GET's connection
        let client = HTTPClient(configuration: configuration)
        let get = Task(executorPreference: loop) { try await client.execute(HTTPClientRequest(url: server.baseURL + "/get")) }
        #expect(await getArrived.opened(within: 60))
        let post = Task(executorPreference: loop) {
            try await client.execute(HTTPClientRequest(method: "POST", url: server.baseURL + "/upload",
                                                       body: [UInt8](repeating: 0x61, count: 8 << 20)))
        }
        // Time for the POST to queue behind the GET (if it comes later, it goes on a fresh
        // connection, which the server closes at once: the same failure, a weaker test).
        try await Task.sleep(for: .milliseconds(300))
        answerGET.open()
        #expect(try await get.value.body == Array("ok".utf8))
        await #expect(throws: HTTPClientError.self) { try await post.value }
        #expect(!server.requests.contains { $0.method == "POST" })
    }
}

/// How a host's connections are shared between requests of different `share`s.
@Suite("HTTPClient: shares of a host's connections")
struct HTTPClientShareTests {
    /// Requests at the upstream now and at most, by share (the first path segment).
    final class Busy: Sendable {
        private let counts = Mutex<[String: (now: Int, peak: Int)]>([:])
        func enter(_ share: String) { counts.withLock { var c = $0[share] ?? (0, 0); c.now += 1; c.peak = max(c.peak, c.now); $0[share] = c } }
        func leave(_ share: String) { counts.withLock { $0[share]?.now -= 1 } }
        func now(_ share: String) -> Int { counts.withLock { $0[share]?.now ?? 0 } }
        func peak(_ share: String) -> Int { counts.withLock { $0[share]?.peak ?? 0 } }
    }

    @Test("one share's requests hold at most its share of the connections; another share's request goes ahead of its queue")
    func oneShareCannotTakeEveryConnection() async throws {
        let busy = Busy()
        let release = Gate()
        let server = try ScriptedServer { connection in
            while let request = connection.readRequest() {
                let share = String(request.target.dropFirst().prefix { $0 != "/" })
                busy.enter(share)
                if share == "slow" { _ = release.wait(seconds: 60) } // held until the test lets them go
                busy.leave(share)
                guard connection.write(HTTPClientConnectionTests.ok) else { return }
            }
        }
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 4
        configuration.reservedConnectionsPerHost = 2 // so one share holds at most 2
        // Without shares the quick request would wait for a connection the slow ones hold,
        // and fail at the connect and read timeouts (45 s, before the server lets the slow
        // ones go at 60 s). A slow request waits for the others to reach the server and for
        // the quick one: a loaded machine may take many seconds for that.
        configuration.readTimeout = .seconds(40)
        let client = HTTPClient(configuration: configuration)
        let slow = (0..<6).map { i in
            Task { try await client.execute(HTTPClientRequest(url: server.baseURL + "/slow/\(i)", share: "user-1")) }
        }
        let deadline = ContinuousClock.now + .seconds(30) // a no-hang limit only
        while busy.now("slow") < 2 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let quick = try await client.execute(HTTPClientRequest(url: server.baseURL + "/quick", share: "user-2"))
        #expect(quick.status == 200)
        #expect(busy.now("slow") == 2, "user-1 holds its two connections, no more, while user-2 is answered")
        release.open()
        for task in slow { #expect(try await task.value.status == 200) }
        #expect(busy.peak("slow") == 2)
        #expect(server.requests.count == 7)
    }

    @Test("no reserve (0): one share may hold every connection of the host")
    func noReserve() async throws {
        let busy = Busy()
        let release = Gate()
        let server = try ScriptedServer { connection in
            while connection.readRequest() != nil {
                busy.enter("slow")
                _ = release.wait(seconds: 60) // held until the test lets them go
                busy.leave("slow")
                guard connection.write(HTTPClientConnectionTests.ok) else { return }
            }
        }
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 3
        configuration.reservedConnectionsPerHost = 0
        configuration.readTimeout = .seconds(40) // far past the wait below, on a loaded machine too
        let client = HTTPClient(configuration: configuration)
        let slow = (0..<3).map { i in
            Task { try await client.execute(HTTPClientRequest(url: server.baseURL + "/slow/\(i)", share: "user-1")) }
        }
        let deadline = ContinuousClock.now + .seconds(30) // a no-hang limit only
        while busy.now("slow") < 3 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(busy.now("slow") == 3, "the share's third request waited beside no free connection")
        release.open()
        for task in slow { #expect(try await task.value.status == 200) }
    }

    @Test("a request that waits past its timeouts because its own share holds every connection it may fails as shareBusy, unsent")
    func waitingOnItsOwnShare() async throws {
        let release = Gate()
        let server = try ScriptedServer { connection in
            while let request = connection.readRequest() {
                guard request.target.hasPrefix("/slow") else {
                    guard connection.write(HTTPClientConnectionTests.ok) else { return }
                    continue
                }
                // Busy, but never silent for the read timeout: a byte every 200 ms until released.
                guard connection.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") else { return }
                while !release.wait(seconds: 0.2) { guard connection.write("1\r\nx\r\n") else { return } }
                guard connection.write("0\r\n\r\n") else { return }
            }
        }
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 2
        configuration.reservedConnectionsPerHost = 1 // one share holds at most 1
        configuration.connectTimeout = .seconds(1)
        // A queued request gives up after 4 s; the busy one, sent a byte every 200 ms, is
        // never silent that long, even run late on a loaded machine.
        configuration.readTimeout = .seconds(3)
        let client = HTTPClient(configuration: configuration)
        let holding = Task { try await client.execute(HTTPClientRequest(url: server.baseURL + "/slow/1", share: "user-1")) }
        while server.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        var queuedError: HTTPClientError?
        do { _ = try await client.execute(HTTPClientRequest(url: server.baseURL + "/slow/2", share: "user-1")) } catch { queuedError = error }
        #expect(queuedError?.isShareBusy == true, "\(String(describing: queuedError))")
        // Another share's request has the reserved connection meanwhile.
        #expect(try await client.execute(HTTPClientRequest(url: server.baseURL + "/quick", share: "user-2")).status == 200)
        release.open()
        #expect(try await holding.value.status == 200)
        #expect(!server.requests.contains { $0.target == "/slow/2" }, "the queued request was never sent")
    }
}

/// A number handed out once each (connection 0, 1, ...), shared with script threads.
final class Numbering: Sendable {
    private let value = Atomic(0)
    func next() -> Int { value.add(1, ordering: .acquiringAndReleasing).oldValue }
}

/// SIGPIPEs raised on threads named "sigpipe-watch", counted by a signal handler.
enum PipeSignals {
    static var count: Int { watchedPipeSignals.load(ordering: .acquiring) }

    /// Installs the counting handler in place of whatever SIGPIPE does now (SIG_IGN, as a
    /// rule). It is left in place: it does what SIG_IGN does, and counts.
    static func install() -> Bool {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = countingHandler
        action.sa_flags = SA_RESTART
        sigemptyset(&action.sa_mask)
        return sigaction(SIGPIPE, &action, nil) == 0
    }

    /// Whether the counting handler is still the one in place.
    static var isInstalled: Bool {
        var current = sigaction()
        guard sigaction(SIGPIPE, nil, &current) == 0, let handler = current.__sigaction_handler.sa_handler else { return false }
        return unsafeBitCast(handler, to: UnsafeRawPointer.self) == unsafeBitCast(countingHandler, to: UnsafeRawPointer.self)
    }

    /// Names the calling thread "sigpipe-watch": its SIGPIPEs are counted.
    static func watchThisThread() {
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        _ = write(fd, "sigpipe-watch", 13)
        close(fd)
    }

    /// Raises SIGPIPE on the calling thread, as a write without MSG_NOSIGNAL to a socket
    /// whose peer has gone does.
    static func raiseHere() {
        var pair: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { return }
        close(pair[1])
        var byte: UInt8 = 0
        _ = write(pair[0], &byte, 1) // EPIPE, and SIGPIPE
        close(pair[0])
    }
}

private let watchedPipeSignals = Atomic(0)

/// Counts a SIGPIPE when the thread it was raised on is named "sigpipe-watch". Only
/// async-signal-safe calls: the name is read from /proc into the stack.
private let countingHandler: @convention(c) (Int32) -> Void = { _ in
    let savedErrno = errno
    defer { errno = savedErrno }
    let path: StaticString = "/proc/thread-self/comm"
    let fd = open(UnsafeRawPointer(path.utf8Start).assumingMemoryBound(to: CChar.self), O_RDONLY)
    guard fd >= 0 else { return }
    var name: (UInt64, UInt64) = (0, 0)
    let n = withUnsafeMutableBytes(of: &name) { read(fd, $0.baseAddress, 16) }
    close(fd)
    let expected: StaticString = "sigpipe-watch\n"
    guard n == expected.utf8CodeUnitCount else { return }
    let matches = withUnsafeBytes(of: &name) { buffer in
        (0..<expected.utf8CodeUnitCount).allSatisfy { buffer[$0] == expected.utf8Start[$0] }
    }
    if matches { watchedPipeSignals.add(1, ordering: .relaxed) }
}
