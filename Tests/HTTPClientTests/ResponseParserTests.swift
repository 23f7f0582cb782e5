@testable import HTTPClient
import Testing

/// The response parser on its own: where a response ends, and what it refuses. TCP hands the
/// bytes over in pieces of any size, so every valid response must parse the same whether it
/// comes whole, split in two at any byte, or one byte at a time.
@Suite("HTTPClient: ResponseParser")
struct ResponseParserTests {
    /// What parsing a response gave.
    struct Parsed: Equatable, Sendable, CustomStringConvertible {
        var status: Int
        /// "Name: value", in order.
        var headers: [String]
        var body: String
        /// The response ended by its own framing, not by the end of the connection.
        var endedByItsFraming = true
        var allowsReuse = true

        var description: String {
            "\(status) \(headers) body=\(body.debugDescription) framed=\(endedByItsFraming) reuse=\(allowsReuse)"
        }
    }

    enum Outcome: Equatable, Sendable, CustomStringConvertible {
        case parsed(Parsed)
        /// `HTTPClientError.failure`, and the message (not compared).
        case failed(String, message: String = "")

        static func == (a: Outcome, b: Outcome) -> Bool {
            switch (a, b) {
            case let (.parsed(x), .parsed(y)): x == y
            case let (.failed(x, _), .failed(y, _)): x == y
            default: false
            }
        }

        var description: String {
            switch self {
            case let .parsed(parsed): "parsed \(parsed)"
            case let .failed(failure, message): "failed: \(failure) (\(message))"
            }
        }

        static let malformed = Outcome.failed("malformed response")
        static let truncated = Outcome.failed("response truncated")
        static let unanswered = Outcome.failed("closed without an answer")
    }

    /// Feeds `pieces` in order (as a connection would, stopping once the response is
    /// complete), then, if it is not complete, the end of the connection.
    static func parse(_ pieces: [[UInt8]], method: String = "GET") -> Outcome {
        var parser = ResponseParser(requestMethod: method)
        var body: [UInt8] = []
        var endedByItsFraming = false
        do {
            for (index, piece) in pieces.enumerated() {
                let used = try piece.withUnsafeBytes { try parser.feed($0) { body += $0 } }
                if parser.isComplete {
                    endedByItsFraming = true
                    #expect(used == piece.count && index == pieces.count - 1, "the parser completed before the end of the response")
                    break
                }
            }
            if !parser.isComplete { try parser.finishAtEnd() }
        } catch let error as HTTPClientError {
            return .failed(error.failure, message: error.message)
        } catch {
            return .failed("unexpected \(error)")
        }
        let head = parser.head
        return .parsed(Parsed(status: head?.status ?? 0, headers: head?.headers.map { "\($0.name): \($0.value)" } ?? [],
                              body: String(decoding: body, as: UTF8.self), endedByItsFraming: endedByItsFraming,
                              allowsReuse: parser.allowsReuse))
    }

    /// The ways the bytes can arrive: whole, in two pieces split at every offset, and one
    /// byte at a time.
    static func arrivals(of bytes: [UInt8]) -> [(name: String, pieces: [[UInt8]])] {
        var all = [(name: "whole", pieces: [bytes])]
        for offset in 1..<max(1, bytes.count) {
            all.append((name: "split at \(offset)", pieces: [Array(bytes[..<offset]), Array(bytes[offset...])]))
        }
        all.append((name: "byte by byte", pieces: bytes.map { [$0] }))
        return all
    }

    /// Parses `response` arriving in each way, expecting `expected` every time; stops at the
    /// first way that differs (one failure tells enough).
    static func expectSameOutcomeHoweverSplit(_ response: String, method: String = "GET", _ expected: Outcome,
                                              sourceLocation: SourceLocation = #_sourceLocation) {
        for (name, pieces) in arrivals(of: Array(response.utf8)) {
            let outcome = parse(pieces, method: method)
            guard outcome == expected else {
                Issue.record("\(name): \(outcome), expected \(expected)", sourceLocation: sourceLocation)
                return
            }
        }
    }

    // MARK: - Valid responses

    struct Valid: Sendable, CustomTestStringConvertible {
        let name: String
        var method = "GET"
        let response: String
        let expected: Parsed
        var testDescription: String { name }
    }

    static let valid: [Valid] = [
        Valid(name: "Content-Length",
              response: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
              expected: Parsed(status: 200, headers: ["Content-Type: text/plain", "Content-Length: 5"], body: "hello")),
        Valid(name: "Content-Length: 0",
              response: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
              expected: Parsed(status: 200, headers: ["Content-Length: 0"], body: "")),
        Valid(name: "the same Content-Length twice",
              response: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3, 3\r\n\r\nabc",
              expected: Parsed(status: 200, headers: ["Content-Length: 3", "Content-Length: 3, 3"], body: "abc")),
        Valid(name: "chunked, with extensions, upper-case hex and trailers",
              response: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + "5;name=value\r\nhello\r\n6 ;a=1;b=\"x y\"\r\n world\r\nA\r\n0123456789\r\n"
                  + "0;last\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n",
              expected: Parsed(status: 200, headers: ["Transfer-Encoding: chunked"], body: "hello world0123456789")),
        Valid(name: "chunked, no trailers",
              response: "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
              expected: Parsed(status: 201, headers: ["Transfer-Encoding: chunked", "X-A: 1"], body: "abc")),
        Valid(name: "delimited by the close",
              response: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the connection ends",
              expected: Parsed(status: 200, headers: ["Content-Type: text/plain"], body: "until the connection ends",
                               endedByItsFraming: false, allowsReuse: false)),
        Valid(name: "ten interim responses, the most allowed",
              response: String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 10) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
              expected: Parsed(status: 200, headers: ["Content-Length: 2"], body: "ok")),
        Valid(name: "interim 100 and 103 before the 200",
              response: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                  + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
              expected: Parsed(status: 200, headers: ["Content-Length: 2"], body: "ok")),
        Valid(name: "HEAD with Content-Length", method: "HEAD",
              response: "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nETag: \"v1\"\r\n\r\n",
              expected: Parsed(status: 200, headers: ["Content-Length: 1000", "ETag: \"v1\""], body: "", allowsReuse: false)),
        Valid(name: "HEAD with chunked", method: "HEAD", // the connection is not reused after HEAD (a body may follow late)
              response: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
              expected: Parsed(status: 200, headers: ["Transfer-Encoding: chunked"], body: "", allowsReuse: false)),
        Valid(name: "204",
              response: "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
              expected: Parsed(status: 204, headers: ["X-A: 1"], body: "")),
        Valid(name: "304 with Content-Length", // the representation's length; its body may follow late from a faulty server
              response: "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 1000\r\n\r\n",
              expected: Parsed(status: 304, headers: ["ETag: \"v1\"", "Content-Length: 1000"], body: "", allowsReuse: false)),
        Valid(name: "LF-only line ends",
              response: "HTTP/1.1 200 OK\nContent-Length: 3\nX-A: b\n\nabc",
              expected: Parsed(status: 200, headers: ["Content-Length: 3", "X-A: b"], body: "abc")),
        Valid(name: "LF-only line ends, chunked",
              response: "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n",
              expected: Parsed(status: 200, headers: ["Transfer-Encoding: chunked"], body: "abc")),
        Valid(name: "obs-fold joined with a space",
              response: "HTTP/1.1 200 OK\r\nX-Folded: one\r\n  two\r\n\tthree \r\nContent-Length: 0\r\n\r\n",
              expected: Parsed(status: 200, headers: ["X-Folded: one two three", "Content-Length: 0"], body: "")),
        Valid(name: "no reason phrase, empty and padded values",
              response: "HTTP/1.1 200\r\nX-Empty:\r\nX-Padded: \t a b \t\r\nContent-Length: 2\r\n\r\nok",
              expected: Parsed(status: 200, headers: ["X-Empty: ", "X-Padded: a b", "Content-Length: 2"], body: "ok")),
    ]

    @Test(arguments: valid)
    func validResponseParsesTheSameHoweverItArrives(_ valid: Valid) {
        Self.expectSameOutcomeHoweverSplit(valid.response, method: valid.method, .parsed(valid.expected))
    }

    // MARK: - Malformed responses

    struct Malformed: Sendable, CustomTestStringConvertible {
        let name: String
        let response: String
        var testDescription: String { name }
    }

    static let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

    static let malformed: [Malformed] = [
        Malformed(name: "bare CR in a header value", response: "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "bare CR after the status line", response: "HTTP/1.1 200 OK\rContent-Length: 0\r\n\r\n"),
        Malformed(name: "space before the colon", response: "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok"),
        Malformed(name: "field name not a token", response: "HTTP/1.1 200 OK\r\nX<A>: 1\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "empty field name", response: "HTTP/1.1 200 OK\r\n: 1\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "header line without a colon", response: "HTTP/1.1 200 OK\r\nNoColon\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "NUL in a header value", response: "HTTP/1.1 200 OK\r\nX-A: a\u{0}b\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "obs-fold before any header", response: "HTTP/1.1 200 OK\r\n folded\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "empty line before the status line", response: "\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "HTTP/2 200", response: "HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "HTTP/1.2", response: "HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "status 600", response: "HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\nok"),
        Malformed(name: "status 999", response: "HTTP/1.1 999 Odd\r\nContent-Length: 2\r\n\r\nok"),
        Malformed(name: "lower-case protocol name", response: "http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "two-digit status", response: "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "four-digit status", response: "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "status below 100", response: "HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "101 never asked for", response: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
                  + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "eleven interim responses", response: String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 11)
                  + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        Malformed(name: "differing Content-Length fields", response: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
        Malformed(name: "differing Content-Length values in one field", response: "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello!"),
        Malformed(name: "Content-Length: +5", response: "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello"),
        Malformed(name: "Content-Length: 1 2 (whitespace between digits)", response: "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\nhello world!"),
        Malformed(name: "Content-Length: 5x", response: "HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello"),
        Malformed(name: "Content-Length: -1", response: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
        Malformed(name: "empty Content-Length", response: "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n"),
        Malformed(name: "Content-Length of 20 digits", response: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n"),
        Malformed(name: "Transfer-Encoding: gzip, chunked", response: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
        Malformed(name: "Transfer-Encoding: gzip", response: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz"),
        Malformed(name: "HTTP/1.0 with Transfer-Encoding: chunked", response: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"),
        Malformed(name: "HTTP/1.0 with Transfer-Encoding and Content-Length",
                  response: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"),
        Malformed(name: "chunk size with no digits", response: chunked + ";ext=1\r\nhello\r\n0\r\n\r\n"),
        Malformed(name: "empty chunk-size line", response: chunked + "\r\nhello\r\n0\r\n\r\n"),
        Malformed(name: "chunk size not hex", response: chunked + "xyz\r\nhello\r\n0\r\n\r\n"),
        Malformed(name: "junk after the chunk size", response: chunked + "5 x\r\nhello\r\n0\r\n\r\n"),
        Malformed(name: "chunk size of 16 hex digits", response: chunked + "FFFFFFFFFFFFFFFF\r\nhello\r\n"),
        Malformed(name: "chunk size of 17 hex digits", response: chunked + "10000000000000005\r\nhello\r\n"),
        Malformed(name: "chunk data longer than declared", response: chunked + "5\r\nhello!\r\n0\r\n\r\n"),
        Malformed(name: "bare CR in a chunk-size line", response: chunked + "5\r;x\r\nhello\r\n0\r\n\r\n"),
    ]

    @Test(arguments: malformed)
    func malformedResponseIsRefusedHoweverItArrives(_ malformed: Malformed) {
        Self.expectSameOutcomeHoweverSplit(malformed.response, .malformed)
    }

    /// A head over 64 KiB is refused, whether in one field or many (and, the control, a head
    /// just under the limit is not): a server cannot make the client buffer without end.
    @Test func headOver64KiBIsRefused() {
        let bigField = "HTTP/1.1 200 OK\r\nX-Big: " + String(repeating: "x", count: 70_000) + "\r\nContent-Length: 0\r\n\r\n"
        let manyFields = "HTTP/1.1 200 OK\r\n" + String(repeating: "X-Field: " + String(repeating: "y", count: 90) + "\r\n", count: 700)
            + "Content-Length: 0\r\n\r\n"
        let underTheLimit = "HTTP/1.1 200 OK\r\nX-Big: " + String(repeating: "x", count: 60_000) + "\r\nContent-Length: 0\r\n\r\n"
        for response in [bigField, manyFields] {
            let bytes = Array(response.utf8)
            #expect(Self.parse([bytes]) == .malformed)
            #expect(Self.parse(bytes.map { [$0] }) == .malformed)
            #expect(Self.parse([Array(bytes[..<40_000]), Array(bytes[40_000...])]) == .malformed)
        }
        let bytes = Array(underTheLimit.utf8)
        #expect(Self.parse([bytes]) == .parsed(Parsed(status: 200, headers: ["X-Big: " + String(repeating: "x", count: 60_000), "Content-Length: 0"], body: "")))
        // Without an end of head, refused as soon as 64 KiB have come (not kept waiting).
        var parser = ResponseParser(requestMethod: "GET")
        let endless = Array(("HTTP/1.1 200 OK\r\nX-Big: " + String(repeating: "x", count: 70_000)).utf8)
        #expect(throws: HTTPClientError.self) { try endless.withUnsafeBytes { _ = try parser.feed($0) { _ in } } }
    }

    // MARK: - The end of the connection

    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", Outcome.truncated),
        ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", Outcome.truncated),
        (chunked + "5\r\nhel", Outcome.truncated),
        (chunked + "5\r\nhello", Outcome.truncated),
        (chunked + "5\r\nhello\r\n", Outcome.truncated),
        (chunked + "5\r\nhello\r\n0\r\n", Outcome.truncated),
        (chunked + "5\r\nhello\r\n0\r\nX-Trailer: t\r\n", Outcome.truncated),
        ("", Outcome.unanswered),
        ("HTTP/1.1 200 OK\r\nContent-Len", Outcome.malformed),
        ("HTTP/1.1 100 Continue\r\n\r\n", Outcome.malformed),
        ("SSH-2.0-OpenSSH_9.6\r\n", Outcome.malformed),
        ("HTTP/1.1 200 OK\r\n\r\nall of it", Outcome.parsed(Parsed(status: 200, headers: [], body: "all of it", endedByItsFraming: false, allowsReuse: false))),
        ("HTTP/1.1 200 OK\r\n\r\n", Outcome.parsed(Parsed(status: 200, headers: [], body: "", endedByItsFraming: false, allowsReuse: false))),
    ])
    func endOfTheConnection(received: String, expected: Outcome) {
        #expect(Self.parse([Array(received.utf8)]) == expected)
    }

    // MARK: - Reuse of the connection

    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true),
        ("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", true),
        ("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false),
        ("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok", false),
        ("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false),
        ("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", false),
        ("HTTP/1.1 200 OK\r\n\r\nok", false),
        ("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false),
    ])
    func connectionReuse(response: String, reusable: Bool) throws {
        guard case let .parsed(parsed) = Self.parse([Array(response.utf8)]) else {
            Issue.record("not parsed")
            return
        }
        #expect(parsed.body == "ok") // with both framings, the chunked one counts
        #expect(parsed.allowsReuse == reusable)
    }

    /// Bytes after the end of the response were never asked for: the connection is out of
    /// step and must not carry another request.
    @Test func bytesAfterTheResponseForbidReuse() throws {
        let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
        let extra = Array("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil".utf8)

        var together = ResponseParser(requestMethod: "GET")
        var body: [UInt8] = []
        let used = try (response + extra).withUnsafeBytes { try together.feed($0) { body += $0 } }
        #expect(used == response.count)
        #expect(body == Array("ok".utf8))
        #expect(together.isComplete)
        #expect(!together.allowsReuse)

        var later = ResponseParser(requestMethod: "GET")
        _ = try response.withUnsafeBytes { try later.feed($0) { _ in } }
        #expect(later.isComplete && later.allowsReuse)
        #expect(try extra.withUnsafeBytes { try later.feed($0) { _ in } } == 0)
        #expect(!later.allowsReuse)
    }
}
