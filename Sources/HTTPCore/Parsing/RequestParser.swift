/// A request as the parser produced it, before the server adds its id and logger.
public struct ParsedRequest: Sendable {
    public var method: String
    /// Origin-form path and query (an accepted absolute-form target is reduced to this).
    public var target: String
    public var version: HTTPVersion
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Whether the connection may carry another request after this one.
    public var keepAlive: Bool
}

/// What one call to `RequestParser.parse` found.
public enum ParseOutcome: Sendable {
    /// More bytes are needed. The first `consumed` bytes were used and must be dropped.
    case needMoreData(consumed: Int)
    /// The head asked for `100-continue`; send the interim response, then go on reading.
    case continueRequested(consumed: Int)
    /// A whole request; the first `consumed` bytes were used.
    case complete(ParsedRequest, consumed: Int)
    /// The request is refused; answer with `error.status` and close the connection.
    case failed(ParseError)
}

/// An incremental, strict HTTP/1.1 request parser (RFC 9112). It refuses what request
/// smugglers rely on instead of guessing: bare CR or LF, obs-fold, whitespace before the
/// colon, control bytes, `Content-Length` with `Transfer-Encoding`, differing or malformed
/// lengths, transfer codings other than a single final `chunked`, foreign absolute-form
/// targets and CONNECT; a protocol upgrade is not refused but ends the connection after its
/// request. Pure: it does no I/O, so it can be tested and fuzzed byte by byte.
public struct RequestParser: Sendable {
    enum State: Sendable {
        case head
        case fixedBody(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        /// `searched`: bytes of the unfinished trailer line already searched for its end.
        case trailers(count: Int, bytes: Int, searched: Int)
        case closed
    }

    public let limits: HTTPLimits
    /// The method of the request being read, once its request line has arrived (kept when
    /// the request is refused: a refusal of a HEAD request has no body); nil between requests.
    public internal(set) var requestMethod: String?
    private var state: State = .head
    private var current: ParsedRequest?
    /// The head read so far, while it has not arrived whole.
    var progress = HeadProgress()
    /// Chunk-extension bytes of the message being read: ignored, but read, so they are
    /// bounded (as the header block is) where the chunk data counts against the body limit.
    private var extensionBytes = 0
    /// Bytes searched for the ends of head and trailer lines, a byte counted again each time
    /// it is searched again: for tests that check a message sent in pieces costs no more than
    /// one sent whole.
    var bytesSearched = 0

    public init(limits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
    }

    /// Parses from `bytes`, which must start where the previous call's `consumed` ended.
    public mutating func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> ParseOutcome {
        var consumed = 0
        while true {
            let rest = UnsafeBufferPointer(rebasing: bytes[consumed...])
            switch state {
            case .closed:
                // Empty lines after the last message are tolerated (RFC 9112 §2.2); anything else is refused.
                var k = 0
                while k < rest.count, rest[k] == CR || rest[k] == LF { k += 1 }
                return k == rest.count ? .needMoreData(consumed: consumed + k) : .failed(.bad("data after Connection: close"))
            case .head:
                switch parseHead(rest) {
                case let .needMore(used):
                    return .needMoreData(consumed: consumed + used)
                case let .failure(error):
                    state = .closed
                    return .failed(error)
                case let .head(request, used, bodyState, expectsContinue):
                    consumed += used
                    current = request
                    extensionBytes = 0
                    state = bodyState
                    if case .head = bodyState { return finish(consumed: consumed) }
                    if expectsContinue { return .continueRequested(consumed: consumed) }
                }
            case let .fixedBody(remaining):
                let take = min(remaining, rest.count)
                current!.body.append(contentsOf: rest[0..<take])
                consumed += take
                if take == remaining { return finish(consumed: consumed) }
                state = .fixedBody(remaining: remaining - take)
                return .needMoreData(consumed: consumed)
            case .chunkSize:
                switch parseChunkSize(rest) {
                case .needMore: return .needMoreData(consumed: consumed)
                case let .failure(error): state = .closed; return .failed(error)
                case let .size(size, used, extensions):
                    consumed += used
                    extensionBytes += extensions
                    if extensionBytes > limits.maxHeaderBytes {
                        state = .closed
                        return .failed(.bad("chunk extensions too large"))
                    }
                    if size == 0 {
                        state = .trailers(count: 0, bytes: 0, searched: 0)
                    } else if current!.body.count + size > limits.maxBodyBytes {
                        state = .closed
                        return .failed(ParseError(.contentTooLarge, "chunked body exceeds the limit"))
                    } else {
                        state = .chunkData(remaining: size)
                    }
                }
            case let .chunkData(remaining):
                let take = min(remaining, rest.count)
                current!.body.append(contentsOf: rest[0..<take])
                consumed += take
                if take < remaining {
                    state = .chunkData(remaining: remaining - take)
                    return .needMoreData(consumed: consumed)
                }
                state = .chunkDataEnd
            case .chunkDataEnd:
                if rest.count < 2 {
                    if rest.count == 1, rest[0] != CR { state = .closed; return .failed(.bad("chunk data not followed by CRLF")) }
                    return .needMoreData(consumed: consumed)
                }
                guard rest[0] == CR, rest[1] == LF else { state = .closed; return .failed(.bad("chunk data not followed by CRLF")) }
                consumed += 2
                state = .chunkSize
            case let .trailers(count, size, searched):
                switch parseTrailerLine(rest, count: count, size: size, searched: searched) {
                case let .needMore(searched):
                    state = .trailers(count: count, bytes: size, searched: searched)
                    return .needMoreData(consumed: consumed)
                case let .failure(error): state = .closed; return .failed(error)
                case let .line(used):
                    consumed += used
                    state = .trailers(count: count + 1, bytes: size + used, searched: 0)
                case let .end(used):
                    consumed += used
                    return finish(consumed: consumed)
                }
            }
        }
    }

    /// True between messages: no part of a request has been consumed.
    public var isAtMessageStart: Bool {
        if case .head = state { return true }
        return false
    }

    /// Convenience for `[UInt8]` buffers.
    public mutating func parse(_ bytes: [UInt8]) -> ParseOutcome {
        bytes.withUnsafeBufferPointer { parse($0) }
    }

    private mutating func finish(consumed: Int) -> ParseOutcome {
        let request = current!
        current = nil
        requestMethod = nil
        state = request.keepAlive ? .head : .closed
        return .complete(request, consumed: consumed)
    }
}

let CR: UInt8 = 0x0D
let LF: UInt8 = 0x0A
let SP: UInt8 = 0x20
let HT: UInt8 = 0x09
