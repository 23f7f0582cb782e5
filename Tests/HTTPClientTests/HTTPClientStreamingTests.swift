import BFFTesting
import Foundation
import HTTPClient
import Synchronization
import Testing

@Suite("HTTPClient: streamed bodies")
struct HTTPClientStreamingTests {
    /// Byte `i` of the test bodies.
    static func pattern(_ i: Int) -> UInt8 { UInt8(truncatingIfNeeded: i % 251) }
    static func patternBytes(_ range: Range<Int>) -> [UInt8] { range.map(pattern) }
    /// The first `count` bytes of the pattern, built from whole periods: cheap in a debug build.
    static func patternBody(_ count: Int) -> [UInt8] {
        let period = patternBytes(0..<251)
        var body: [UInt8] = []
        body.reserveCapacity(count + period.count)
        while body.count < count { body += period }
        body.removeLast(body.count - count)
        return body
    }

    @Test func headArrivesBeforeTheBodyIsSent() async throws {
        let gate = Gate()
        let serverWaited = Gate()
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
            // Generous: a loaded machine may starve this thread for seconds; only a client
            // that waits for the body before returning keeps the gate shut this long.
            if !gate.wait(seconds: 30) { serverWaited.open() }
            connection.write("hello")
        }
        let client = HTTPClient()
        let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/"))
        gate.open()
        #expect(response.status == 200)
        #expect(try await response.body.collect() == Array("hello".utf8))
        #expect(!serverWaited.isOpen, "stream() returned only once the body came")
    }

    @Test func twoMegabyteBodyArrivesInSmallPiecesWhileStillBeingSent() async throws {
        let size = 2 << 20, firstPart = 64 << 10
        let body = Self.patternBody(size)
        let gate = Gate()
        let gateTimedOut = Gate()
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n")
            connection.write(Array(body[0..<firstPart]))
            // The rest goes only once the client has consumed a piece.
            if !gate.wait(seconds: 30) { gateTimedOut.open() } // generous, as above
            var offset = firstPart
            while offset < size {
                let end = min(size, offset + 100_000)
                guard connection.write(Array(body[offset..<end])) else { return }
                offset = end
            }
        }
        let client = HTTPClient()
        let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/big"))
        #expect(response.header("Content-Length") == "\(size)")
        var received = 0, pieces = 0, largest = 0, intact = true
        for try await chunk in response.body {
            if pieces == 0 { gate.open() }
            if !chunk.isSlice(of: body, at: received) { intact = false }
            received += chunk.count
            pieces += 1
            largest = max(largest, chunk.count)
        }
        #expect(received == size)
        #expect(intact)
        #expect(!gateTimedOut.isOpen, "the first piece did not arrive before the rest was sent")
        #expect(pieces >= size / (64 << 10))
        #expect(largest <= 64 << 10)
    }

    @Test func slowConsumerPausesTheUpstreamInsteadOfBuffering() async throws {
        // 1 MiB waits for the consumer; the kernel's socket buffers hold a few more.
        let size = 32 << 20
        let sent = Counter()
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.setSendBuffer(64 << 10)
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n")
            let block = Self.patternBytes(0..<(251 * 256)) // whole periods, so every block is the same
            var offset = 0
            while offset < size {
                let n = min(block.count, size - offset)
                guard connection.write(n == block.count ? block : Array(block[..<n])) else { return }
                offset += n
                sent.set(offset)
            }
        }
        let client = HTTPClient()
        let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/huge"))
        var iterator = response.body.makeAsyncIterator()
        var received = try #require(try await iterator.next()).count
        // Stall until the server can send no more.
        var last = -1
        while sent.current != last {
            last = sent.current
            try await Task.sleep(for: .milliseconds(300))
        }
        #expect(last < 12 << 20, "the server sent \(last) bytes to a stalled consumer")
        while let chunk = try await iterator.next() { received += chunk.count }
        #expect(received == size)
    }

    /// A consumer that stops reading (as a browser that reads a few bytes now and then
    /// makes the proxy do) keeps its connection only until the stall timeout: then its body
    /// fails as a timeout and the connection closes, so the host's only connection
    /// (`maxConnectionsPerHost` 1) is free for the next request, which waits for it.
    @Test func aConsumerThatStaysBehindGivesUpItsConnectionAtTheStallTimeout() async throws {
        let server = try ScriptedServer { connection in
            guard let request = connection.readRequest() else { return }
            guard request.target == "/big" else { return _ = connection.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: \(32 << 20)\r\n\r\n")
            let block = [UInt8](repeating: 0x61, count: 64 << 10)
            for _ in 0..<512 { guard connection.write(block) else { return } } // blocks once the client pauses
        }
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 1
        configuration.stallTimeout = .seconds(1)
        configuration.readTimeout = .seconds(5) // the big body keeps coming until its reading pauses
        // A request waits for a connection for the connect and read timeouts together: 25 s,
        // well past the stall timeout, so only a paused transfer that is never ended fails it.
        configuration.connectTimeout = .seconds(20)
        let client = HTTPClient(configuration: configuration)
        let big = try await client.stream(HTTPClientRequest(url: server.baseURL + "/big"))
        #expect(big.status == 200)
        // Its body is not read: 1 MiB fills the buffer, reading pauses, the stall timeout runs.
        let small = try await client.execute(HTTPClientRequest(url: server.baseURL + "/small"))
        #expect(small.body == Array("ok".utf8))
        #expect(server.connectionCount == 2)
        var iterator = big.body.makeAsyncIterator()
        let error = await #expect(throws: HTTPClientError.self) { _ = try await iterator.next() }
        #expect(error?.isStalled == true, "\(String(reflecting: error))")
    }

    /// A consumer that keeps reading, only slowly (a browser on a slow link, through the
    /// proxy), is never stalled and gets the whole body. With a 12 s stall timeout it reads at
    /// 48 KiB/s (after each piece, of at most 64 KiB, it waits 1 s per 48 KiB the piece held):
    /// no gap between two pieces comes near 12 s, even on a loaded machine that runs the
    /// consumer seconds late, but bringing a paused transfer's 1 MiB below ¼ MiB takes it some
    /// 16 s, so a stall timeout counted from the pause (not from the last piece taken) would
    /// end the transfer. The body
    /// follows its first kilobyte only once the consumer has taken that: a consumer task that
    /// a loaded machine has not run yet when 1 MiB is waiting for it would look, rightly,
    /// stalled.
    @Test func aConsumerThatReadsSlowlyButSteadilyGetsTheWholeBody() async throws {
        let size = 1_152 << 10, firstPart = 1 << 10 // 1.125 MiB: reading pauses at 1 MiB
        let body = Self.patternBody(size)
        let consuming = Gate()
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n")
            connection.write(Array(body[0..<firstPart]))
            guard consuming.wait(seconds: 30) else { return } // a 'no hang' limit only
            var offset = firstPart
            while offset < size {
                let end = min(size, offset + (64 << 10))
                guard connection.write(Array(body[offset..<end])) else { return }
                offset = end
            }
        }
        var configuration = HTTPClient.Configuration()
        configuration.stallTimeout = .seconds(12)
        let client = HTTPClient(configuration: configuration)
        let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/bundle"))
        #expect(response.status == 200)
        var received = 0, intact = true
        for try await chunk in response.body {
            consuming.open()
            if !chunk.isSlice(of: body, at: received) { intact = false }
            received += chunk.count
            try await Task.sleep(for: .milliseconds(1000 * chunk.count / (48 << 10)))
        }
        #expect(received == size)
        #expect(intact)
    }

    /// A request that waits for one of the host's connections, all busy, and times out says
    /// so: not "no data from the upstream", which would send an operator after the EHR.
    @Test func aRequestThatNeverGetsAConnectionSaysSo() async throws {
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: \(32 << 20)\r\n\r\n")
            let block = [UInt8](repeating: 0x61, count: 64 << 10)
            for _ in 0..<512 { guard connection.write(block) else { return } } // blocks once the client pauses
        }
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 1
        configuration.stallTimeout = .seconds(120) // the first transfer keeps its connection throughout
        configuration.connectTimeout = .seconds(1)
        configuration.readTimeout = .seconds(1)
        let client = HTTPClient(configuration: configuration)
        let big = try await client.stream(HTTPClientRequest(url: server.baseURL + "/big"))
        let error = await #expect(throws: HTTPClientError.self) { _ = try await client.execute(HTTPClientRequest(url: server.baseURL + "/small")) }
        #expect(error?.isTimeout == true && String(describing: error).contains("no connection to the upstream came free"),
                "\(String(reflecting: error))")
        big.body.cancel()
    }

    @Test func droppingTheBodyClosesTheUpstreamTransfer() async throws {
        let peerClosed = Gate()
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n")
            connection.write([UInt8](repeating: 1, count: 4 << 20)) // ends early once the client closes
            // Until the client closes: the wait starts when the writing ends, which says
            // nothing about when the test's task gets to drop the body.
            if connection.waitForPeerClose(seconds: 120) { peerClosed.open() }
        }
        let client = HTTPClient()
        do {
            let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/"))
            var iterator = response.body.makeAsyncIterator()
            _ = try await iterator.next()
        } // the body stream goes here
        #expect(await peerClosed.opened(within: 60), "the upstream connection stayed open after the body was dropped")
        // Neither goes before the check: a client that shut down, or a server that closed
        // its end, would also end the connection.
        withExtendedLifetime(client) {}
        #expect(server.connectionCount == 1)
    }

    @Test func cancellingTheConsumingTaskEndsTheBodyWithCancelled() async throws {
        let firstPiece = Gate()
        let peerClosed = Gate()
        let server = try tenBytesThenWait(openingOnClose: peerClosed)
        let client = HTTPClient()
        let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/"))
        let body = response.body // kept to the end: the cancellation, not a drop, must end the transfer
        let consumer = Task { () throws -> Int in
            var n = 0
            for try await chunk in body {
                n += chunk.count
                firstPiece.open()
            }
            return n
        }
        #expect(await firstPiece.opened(within: 60), "the first piece of the body never reached the consumer")
        consumer.cancel() // the consumer waits for more, or is about to
        let error = await #expect(throws: HTTPClientError.self) { try await consumer.value }
        // Only the cancellation ends it early: otherwise the 30 s read timeout would (isTimeout).
        #expect(error?.isCancelled == true)
        #expect(await peerClosed.opened(within: 60), "the cancelled transfer's connection stayed open")
        withExtendedLifetime((client, body)) {}
    }

    /// A program started while a transfer is open (the test run starts PostgreSQL, the demo
    /// starts its cluster) must not inherit the transfer's socket: a child holding it would
    /// keep the upstream connection open after the transfer ends.
    @Test func childProcessesDoNotInheritUpstreamConnections() async throws {
        let peerClosed = Gate()
        let server = try tenBytesThenWait(openingOnClose: peerClosed)
        let client = HTTPClient()
        let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/"))
        var iterator = response.body.makeAsyncIterator()
        #expect(try await iterator.next() == Array("0123456789".utf8))
        // A plain posix_spawn, as any library might do, of a child that outlives the transfer.
        // The child outlives the wait below by far (it is killed at the end), so a socket it
        // inherited keeps the connection open past the wait, however late this task resumes.
        let child = try spawnSleeper(seconds: 180)
        defer { kill(child, SIGKILL); waitpid(child, nil, 0) }
        response.body.cancel()
        #expect(await peerClosed.opened(within: 60), "the child process kept the upstream connection open")
        withExtendedLifetime(client) {}
    }

    /// A server that answers with the head of a 1 000-byte body and its first ten bytes
    /// ("0123456789"), never sends the rest, and opens `peerClosed` once the client closes
    /// the connection.
    private func tenBytesThenWait(openingOnClose peerClosed: Gate) throws -> ScriptedServer {
        try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
            if connection.waitForPeerClose(seconds: 120) { peerClosed.open() }
        }
    }

    /// Starts `/bin/sleep` with nothing but the default file actions.
    private func spawnSleeper(seconds: Int) throws -> pid_t {
        let words: [String] = ["/bin/sleep", String(seconds)]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/bin/sleep", nil, nil, argv, environ)
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EINVAL) }
        return pid
    }

    @Test func droppingTheClientEndsBodiesStillArrivingWithCancelled() async throws {
        let peerClosed = Gate()
        let server = try tenBytesThenWait(openingOnClose: peerClosed)
        var client: HTTPClient? = HTTPClient()
        let response = try await client!.stream(HTTPClientRequest(url: server.baseURL + "/"))
        var iterator = response.body.makeAsyncIterator()
        #expect(try await iterator.next() == Array("0123456789".utf8))
        client = nil // the client's thread stops; the transfer must not hang on it
        let error = await #expect(throws: HTTPClientError.self) { try await iterator.next() }
        // Only the shutdown ends it early: otherwise the 30 s read timeout would (isTimeout).
        #expect(error?.isCancelled == true)
        #expect(await peerClosed.opened(within: 60), "the upstream connection stayed open after the client went")
    }
}
