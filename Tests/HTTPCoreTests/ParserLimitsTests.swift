@testable import HTTPCore
import Testing

/// Size limits (HTTPLimits): each refused with its status, as soon as it is certain, and each
/// exact limit still accepted however the bytes are split.
@Suite("parser: size limits")
struct ParserLimitsTests {
    static let kib = 1024

    @Test("a request line over 8 KiB is 414; exactly 8 KiB is accepted")
    func requestLineTooLong() {
        let atLimit = "GET /" + String(repeating: "a", count: 8 * Self.kib - 14) + " HTTP/1.1"
        #expect(atLimit.utf8.count == 8 * Self.kib)
        #expect(Wire.request(atLimit + "\r\nHost: a\r\n\r\n") != nil)
        #expect(Wire.refusal("GET /" + String(repeating: "a", count: 8 * Self.kib - 13) + " HTTP/1.1\r\nHost: a\r\n\r\n") == 414)
    }

    @Test("an over-long request line is 414 before its end arrives")
    func requestLineTooLongEarly() {
        #expect(Wire.status(of: Wire.firstOutcome("GET /" + String(repeating: "a", count: 9 * Self.kib))) == 414)
    }

    @Test("a header block over 16 KiB is 431, also before its end arrives")
    func headerBlockTooLarge() {
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 17 * Self.kib) + "\r\n\r\n") == 431)
        #expect(Wire.status(of: Wire.firstOutcome("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 17 * Self.kib))) == 431)
        let many = (0..<80).map { "X-\($0): " + String(repeating: "v", count: 200) + "\r\n" }.joined()
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\n" + many + "\r\n") == 431)
    }

    @Test("a header block of exactly the limit is accepted, even when cut between its final CR and LF")
    func headerBlockAtLimit() {
        var limits = HTTPLimits()
        limits.maxHeaderBytes = 64
        let fields = "Host: a\r\nX: " + String(repeating: "b", count: 50) + "\r\n"
        #expect(fields.utf8.count == 64)
        let raw = Wire.bytes("GET / HTTP/1.1\r\n" + fields + "\r\n")
        #expect(feed([raw], limits: limits).requests.count == 1)
        let cut = feed([Array(raw.dropLast()), [raw.last!]], limits: limits)
        #expect(cut.refusal == nil && cut.requests.count == 1)
        let over = Wire.bytes("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 51) + "\r\n\r\n")
        #expect(feed([over], limits: limits).refusal == 431)
    }

    @Test("101 header fields are 431; 100 are accepted")
    func tooManyFields() {
        let fields = { (n: Int) in (1..<n).map { "X-\($0): 1\r\n" }.joined() }
        #expect(Wire.request("GET / HTTP/1.1\r\nHost: a\r\n" + fields(100) + "\r\n")?.headers.count == 100)
        #expect(Wire.refusal("GET / HTTP/1.1\r\nHost: a\r\n" + fields(101) + "\r\n") == 431)
    }

    @Test("Content-Length over 1 MiB is 413 as soon as the head is in, before any body byte")
    func contentLengthTooLarge() {
        let outcome = Wire.firstOutcome("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n")
        #expect(Wire.status(of: outcome) == 413)
        guard case .needMoreData = Wire.firstOutcome("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n\r\n") else {
            Issue.record("exactly 1 MiB should wait for its body"); return
        }
    }

    @Test("a chunked body growing over the limit is 413 at the chunk that crosses it")
    func chunkedTooLarge() {
        var limits = HTTPLimits()
        limits.maxBodyBytes = 10
        let head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        #expect(Wire.request(head + "5\r\n12345\r\n5\r\n67890\r\n0\r\n\r\n", limits: limits)?.body.count == 10)
        #expect(Wire.refusal(head + "8\r\n12345678\r\n3\r\n", limits: limits) == 413)
        #expect(Wire.refusal(head + "fffffffffffffff\r\n", limits: limits) == 413)
    }

    @Test("chunk extensions are limited like the header block, over the whole message: at the limit accepted, beyond 400")
    func chunkExtensionLimit() {
        var limits = HTTPLimits()
        limits.maxHeaderBytes = 64
        let head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        // Each chunk's line: "1", then an extension of 16 bytes (";e=" and 13 more).
        let chunk = "1;e=" + String(repeating: "x", count: 13) + "\r\nX\r\n"
        #expect(Wire.request(head + String(repeating: chunk, count: 4) + "0\r\n\r\n", limits: limits)?.body.count == 4)
        #expect(Wire.refusal(head + String(repeating: chunk, count: 5) + "0\r\n\r\n", limits: limits) == 400)
        // The count starts again with each message.
        let twice = head + String(repeating: chunk, count: 4) + "0\r\n\r\n"
        #expect(feed([Wire.bytes(twice + twice)], limits: limits).requests.count == 2)
    }

    @Test("trailers are limited like the header block: at the limit accepted, beyond 431")
    func trailerLimit() {
        var limits = HTTPLimits()
        limits.maxHeaderBytes = 64
        let head = Wire.bytes("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n")
        let atLimit = Wire.bytes("T: " + String(repeating: "t", count: 59) + "\r\n\r\n")
        #expect(feed([head + atLimit], limits: limits).requests.count == 1)
        let cut = feed([head + atLimit.dropLast(), [10]], limits: limits)
        #expect(cut.refusal == nil && cut.requests.count == 1)
        #expect(feed([head + Wire.bytes("T: " + String(repeating: "t", count: 60) + "\r\n\r\n")], limits: limits).refusal == 431)
    }
}
