@testable import HTTPClient
import HTTPCore
import Testing

/// How a streamed body's pieces wait for their consumer.
@Suite("HTTPClient: body buffer")
struct BodyBufferTests {
    /// The most pieces a 1 MiB body in tiny chunks may reach the consumer in (merged into
    /// pieces of about 16 KiB, it takes some 70).
    static let maxPieces = 1000

    /// An EHR sends 1 048 576 one-byte chunks (`1\r\nx\r\n`, 6 MiB on the wire). They go
    /// through a streaming exchange's parser 64 KiB at a time, as a connection's reads
    /// would, to a consumer that is behind: it takes what waits only when reading pauses,
    /// and at the end. The bytes must reach it whole and in few pieces, not one array per
    /// byte; the count is checked as the pieces are taken, and taking stops once it is
    /// exceeded (one array per byte, each taken by moving all the others forward, would
    /// take hours to drain).
    @Test func aMillionOneByteChunksReachTheConsumerInFewPieces() async throws {
        let loop = try EventLoop(application: nil)
        loop.start(name: "body-buffer-test")
        defer { loop.execute { loop.stop() } }
        // On the loop's thread, where the client runs an exchange (and a resume goes).
        let outcome = await withCheckedContinuation { done in
            loop.execute { done.resume(returning: Result { () throws(HTTPClientError) in try Self.oneByteChunks(on: loop) }) }
        }
        let consumed = try outcome.get()
        #expect(consumed.pieces <= Self.maxPieces, "\(consumed.pieces)+ pieces")
        #expect(consumed.bytes == 1 << 20)
        #expect(consumed.allX)
        #expect(consumed.ended)
    }

    private struct Consumed {
        var pieces = 0
        var bytes = 0
        var allX = true
        var ended = false
    }

    /// Loop thread: feeds the body and consumes it as described above.
    private static func oneByteChunks(on loop: EventLoop) throws(HTTPClientError) -> Consumed {
        let shared = ClientShared(tls: TLSContext(verify: true, caCertificatesFile: nil), resolver: Resolver(),
                                  proxies: ProxySettings(configured: nil, environment: [:]))
        var configuration = HTTPClient.Configuration()
        configuration.maxConnectionsPerHost = 1
        let client = ClientLoop(loop: loop, configuration: configuration, groupSize: 1, shared: shared)
        defer { client.close() }
        let exchange = try client.makeExchange(HTTPClientRequest(url: "http://127.0.0.1:9/"), streaming: true)
        var consumed = Consumed()
        guard let buffer = exchange.bodyBuffer else {
            Issue.record("a streaming exchange without a body buffer")
            return consumed
        }
        /// Takes every piece that waits; false once there were too many.
        func drain() -> Bool {
            while case let .success(piece?)? = buffer.nextIfReady() {
                consumed.pieces += 1
                consumed.bytes += piece.count
                if !piece.allSatisfy({ $0 == UInt8(ascii: "x") }) { consumed.allX = false }
                if consumed.pieces > maxPieces { return false }
            }
            return true
        }
        func read(_ bytes: [UInt8]) throws(HTTPClientError) -> Bool {
            let outcome = bytes.withUnsafeBytes { bytes in Result { () throws(HTTPClientError) in try exchange.receive(bytes) } }
            _ = try outcome.get()
            guard exchange.paused else { return true }
            guard drain() else { return false }
            exchange.paused = false // as ClientLoop.resume does
            return true
        }
        guard try read(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)) else { return consumed }
        let chunk = Array("1\r\nx\r\n".utf8)
        let perRead = 65536 / chunk.count
        var fullRead: [UInt8] = []
        fullRead.reserveCapacity(perRead * chunk.count)
        for _ in 0..<perRead { fullRead += chunk }
        var sent = 0
        while sent < 1 << 20 {
            let n = min(perRead, (1 << 20) - sent)
            guard try read(n == perRead ? fullRead : Array(fullRead[..<(n * chunk.count)])) else { return consumed }
            sent += n
        }
        guard try read(Array("0\r\n\r\n".utf8)) else { return consumed }
        #expect(exchange.parser.isComplete)
        exchange.finish(.success(()))
        guard drain() else { return consumed }
        if case .success(nil)? = buffer.nextIfReady() { consumed.ended = true }
        return consumed
    }
}
