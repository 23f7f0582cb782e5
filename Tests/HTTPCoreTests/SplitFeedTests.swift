@testable import HTTPCore
import Testing

/// The parser is incremental: however TCP happens to cut the bytes, it must find the same
/// requests (method, target, headers, body) as from the whole input, and refuse the same input.
@Suite("split feeding gives the same requests as whole input")
struct SplitFeedTests {
    /// Requests written for this test: chunked bodies with extensions and trailers, pipelining,
    /// 100-continue, empty lines between requests.
    static let handWritten: [(String, String)] = [
        ("chunked with extensions and trailers",
         "POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
         + "4;name=\"v a\"\r\nWiki\r\n5 ; x = y\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\nX-T: 1\r\n\r\n"),
        ("pipelined: GET, chunked POST, Content-Length POST, close",
         "GET /a HTTP/1.1\r\nHost: a\r\n\r\n"
         + "POST /b HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
         + "POST /c?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
         + "\r\nGET /d HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
        ("100-continue then the body",
         "PUT /e HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nxyz"),
        ("HTTP/1.0 keep-alive, then 1.1 with obs-text and an empty value",
         "GET /f HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /g HTTP/1.1\r\nHost: a\r\nX: caf\u{E9}\r\nY:\r\n\r\n"),
        ("absolute-form for our own host",
         "GET http://a:8080/h?q HTTP/1.1\r\nHost: a:8080\r\n\r\n"),
    ]

    struct Input: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        var testDescription: String { name }
    }

    static let accepted: [Input] = LLHTTPCorpus.cases.compactMap { c in
        let bytes = LLHTTPCorpusTests.input(c)
        return LLHTTPCorpus.run(bytes).failure == nil ? Input(name: c.title, bytes: bytes) : nil
    } + handWritten.map { Input(name: $0.0, bytes: $0.1.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }) }

    static let refused: [Input] = LLHTTPCorpus.cases.compactMap { c in
        let bytes = LLHTTPCorpusTests.input(c)
        return LLHTTPCorpus.run(bytes).failure != nil ? Input(name: c.title, bytes: bytes) : nil
    }

    @Test("the hand-written inputs parse to the expected requests")
    func handWrittenWhole() {
        let results = SplitFeedTests.handWritten.map { feed([Array($0.1.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) })]) }
        #expect(results.allSatisfy { $0.refusal == nil })
        #expect(results.map { $0.requests.count } == [1, 4, 1, 2, 1])
        #expect(results[0].requests.first?.body == Array("Wikipedia in\r\n\r\nchunks.".utf8))
        #expect(results[1].requests.map(\.target) == ["/a", "/b", "/c?x=1", "/d"])
        #expect(results[1].requests.map(\.keepAlive) == [true, true, true, false])
        #expect(results[2].requests.first?.body == Array("xyz".utf8))
        #expect(results[3].requests.first?.keepAlive == true)
        #expect(results[4].requests.first?.target == "/h?q")
    }

    @Test("accepted inputs: every two-piece split and byte-at-a-time give the same requests", arguments: accepted)
    func acceptedSplits(_ input: Input) {
        let whole = feed([input.bytes])
        #expect(whole.refusal == nil)
        for offset in 1..<input.bytes.count {
            let split = feed([Array(input.bytes[..<offset]), Array(input.bytes[offset...])])
            #expect(split.requests == whole.requests && split.refusal == nil, "split at \(offset)")
            if split.requests != whole.requests || split.refusal != nil { return }
        }
        let bytewise = feed(input.bytes.map { [$0] })
        #expect(bytewise.requests == whole.requests && bytewise.refusal == nil, "byte at a time")
    }

    @Test("a head sent a byte at a time is searched once, not again from its start on every read")
    func byteAtATimeHeadIsSearchedOnce() {
        let fields = (0..<99).map { "X-Field-\($0): " + String(repeating: "v", count: 136) + "\r\n" }.joined()
        let head = Wire.bytes("GET / HTTP/1.1\r\nHost: a\r\n" + fields + "\r\n") // 100 fields, about 15 KB
        var parser = RequestParser()
        var buffer: [UInt8] = []
        var request: ParsedRequest?
        for byte in head {
            buffer.append(byte)
            switch parser.parse(buffer) {
            case let .needMoreData(consumed): buffer.removeFirst(consumed)
            case let .complete(parsed, _): request = parsed
            default: Issue.record("neither more data nor a request"); return
            }
        }
        #expect(request?.headers.count == 100)
        // Each byte once, and the CR of each CRLF again when its LF arrives. Searching from the
        // start of the head on every read would be about head.count² / 2 (over 100 million).
        #expect(parser.bytesSearched <= 2 * head.count, "\(parser.bytesSearched) bytes searched for a \(head.count)-byte head")
    }

    @Test("a chunked body's trailer line sent a byte at a time is searched once, not again from its start on every read")
    func byteAtATimeTrailerIsSearchedOnce() {
        let head = Wire.bytes("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n")
        let trailers = Wire.bytes("X-Trailer: " + String(repeating: "t", count: 15_000) + "\r\nX-Other: 1\r\n\r\n")
        var parser = RequestParser()
        var buffer: [UInt8] = []
        var request: ParsedRequest?
        for byte in head + trailers {
            buffer.append(byte)
            switch parser.parse(buffer) {
            case let .needMoreData(consumed): buffer.removeFirst(consumed)
            case let .complete(parsed, _): request = parsed
            default: Issue.record("neither more data nor a request"); return
            }
        }
        #expect(request?.body == Array("abc".utf8))
        // Searching the 15 KB line from its start on every read would be over 100 million.
        let total = head.count + trailers.count
        #expect(parser.bytesSearched <= 2 * total, "\(parser.bytesSearched) bytes searched for a \(total)-byte message")
    }

    @Test("refused inputs stay refused, after the same requests, however they are split", arguments: refused)
    func refusedSplits(_ input: Input) {
        let whole = feed([input.bytes])
        #expect(whole.refusal != nil)
        for offset in 1..<input.bytes.count {
            let split = feed([Array(input.bytes[..<offset]), Array(input.bytes[offset...])])
            #expect(split.requests == whole.requests && split.refusal == whole.refusal, "split at \(offset)")
            if split.requests != whole.requests || split.refusal != whole.refusal { return }
        }
        let bytewise = feed(input.bytes.map { [$0] })
        #expect(bytewise.requests == whole.requests && bytewise.refusal == whole.refusal, "byte at a time")
    }
}
