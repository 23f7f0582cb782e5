import Foundation
import HTTPClient
import Synchronization
import Testing

@Suite("HTTPClient: streamed bodies")
struct HTTPClientStreamingTests {
    /// Byte `i` of the test bodies.
    static func pattern(_ i: Int) -> UInt8 { UInt8(truncatingIfNeeded: i % 251) }
    static func patternBytes(_ range: Range<Int>) -> [UInt8] { range.map(pattern) }

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
        let gate = Gate()
        let gateTimedOut = Gate()
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n")
            connection.write(Self.patternBytes(0..<firstPart))
            // The rest goes only once the client has consumed a piece.
            if !gate.wait(seconds: 30) { gateTimedOut.open() } // generous, as above
            var offset = firstPart
            while offset < size {
                let end = min(size, offset + 100_000)
                guard connection.write(Self.patternBytes(offset..<end)) else { return }
                offset = end
            }
        }
        let client = HTTPClient()
        let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/big"))
        #expect(response.header("Content-Length") == "\(size)")
        var received = 0, pieces = 0, largest = 0, intact = true
        for try await chunk in response.body {
            if pieces == 0 { gate.open() }
            for (i, byte) in chunk.enumerated() where byte != Self.pattern(received + i) { intact = false; break }
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

    @Test func droppingTheBodyClosesTheUpstreamTransfer() async throws {
        let peerClosed = Gate()
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n")
            connection.write([UInt8](repeating: 1, count: 4 << 20))
            if connection.waitForPeerClose(seconds: 30) { peerClosed.open() }
        }
        let client = HTTPClient()
        do {
            let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/"))
            var iterator = response.body.makeAsyncIterator()
            _ = try await iterator.next()
        } // the body stream goes here
        for _ in 0..<300 where !peerClosed.isOpen { try await Task.sleep(for: .milliseconds(100)) }
        #expect(peerClosed.isOpen)
    }

    @Test func cancellingTheConsumingTaskEndsTheBodyWithCancelled() async throws {
        let server = try ScriptedServer { connection in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
            _ = connection.waitForPeerClose(seconds: 90)
        }
        let client = HTTPClient()
        let response = try await client.stream(HTTPClientRequest(url: server.baseURL + "/"))
        let body = response.body
        let consumer = Task { () throws -> Int in
            var n = 0
            for try await chunk in body { n += chunk.count }
            return n
        }
        try await Task.sleep(for: .milliseconds(200))
        let started = ContinuousClock.now
        consumer.cancel()
        let error = await #expect(throws: HTTPClientError.self) { try await consumer.value }
        #expect(error?.isCancelled == true)
        #expect(ContinuousClock.now - started < .seconds(45)) // the server would hold it 90 s
    }
}
