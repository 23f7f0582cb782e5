#if canImport(Glibc)
import Glibc
#endif
import HTTPCore

/// An incremental parser of one HTTP/1.1 response (RFC 9112), fed the bytes as they arrive.
///
/// Strict where a lenient reading could let two parties disagree on where a response ends:
/// - the status line is `HTTP/1.0` or `HTTP/1.1`, a space and three digits;
/// - field names are tokens with no whitespace before the colon; values hold no control
///   characters but HTAB; a bare CR anywhere is refused;
/// - `Transfer-Encoding` must be exactly `chunked` (nothing else was asked for); with a
///   `Content-Length` beside it the chunked framing counts and the connection is not reused;
///   in an HTTP/1.0 response it is refused (RFC 9112 §6.1: the framing is faulty);
/// - several `Content-Length` values must agree and be plain digits.
///
/// Tolerated, as RFC 9112 allows a recipient: LF alone ending a line, and obs-fold lines
/// (joined to the previous value with a space). Interim 1xx responses are skipped (ten at
/// most), except 101, which was never asked for. Responses to HEAD, and 204 and 304, have no body;
/// the connection of a response to HEAD is not reused.
struct ResponseParser {
    /// The final response head.
    struct Head {
        var status: Int
        var headers: ResponseFields
    }

    private enum State: Equatable {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case untilClose
        case done
    }

    /// Largest response head, and largest trailer section.
    static let maxHeadBytes = 64 * 1024
    /// Largest chunk-size line (extensions included).
    static let maxChunkLineBytes = 4096
    /// Most interim (1xx) responses before the final one: each resets the read timeout, so
    /// without a bound an upstream could hold a request open for ever.
    static let maxInterimResponses = 10

    private let isResponseToHEAD: Bool
    private var state = State.head
    private var headBytes: [UInt8] = []
    private var lineStart = 0
    private var line: [UInt8] = []
    private var trailerBytes = 0
    private var interimResponses = 0

    /// The final head, once it is complete.
    private(set) var head: Head?
    /// Whether any byte of the response has arrived.
    private(set) var hasReceivedAnything = false
    /// The connection may carry another request once this response is complete.
    private(set) var allowsReuse = true
    /// The body's length when `Content-Length` frames it; nil when the body is chunked (a
    /// `Content-Length` beside `Transfer-Encoding` does not count), delimited by the close,
    /// or absent (HEAD, 204, 304).
    private(set) var declaredLength: Int?

    var isComplete: Bool { state == .done }
    /// The body has no declared length: the end of the connection ends it.
    var isDelimitedByClose: Bool { state == .untilClose }
    /// The head said so (no length, not chunked), whether or not the close has come since.
    private(set) var bodyEndsAtClose = false

    init(requestMethod: String) {
        isResponseToHEAD = requestMethod == "HEAD"
    }

    /// Parses `input`. Body bytes go to `body` as slices of `input`, in order. Returns the
    /// number of bytes used: all of `input`, unless the response completed before its end
    /// (what follows is not part of it).
    mutating func feed(_ input: UnsafeRawBufferPointer, body: (UnsafeRawBufferPointer) -> Void) throws(HTTPClientError) -> Int {
        if !input.isEmpty { hasReceivedAnything = true }
        var i = 0
        while i < input.count {
            switch state {
            case .head:
                i = try scanHead(input, from: i)
            case let .fixed(remaining):
                let n = min(remaining, input.count - i)
                body(UnsafeRawBufferPointer(rebasing: input[i..<(i + n)]))
                i += n
                state = n == remaining ? .done : .fixed(remaining: remaining - n)
            case .chunkSize, .chunkDataEnd, .trailers:
                i = try scanLine(input, from: i)
            case let .chunkData(remaining):
                let n = min(remaining, input.count - i)
                body(UnsafeRawBufferPointer(rebasing: input[i..<(i + n)]))
                i += n
                state = n == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - n)
            case .untilClose:
                body(UnsafeRawBufferPointer(rebasing: input[i...]))
                i = input.count
            case .done:
                allowsReuse = false // bytes nobody asked for follow the response
                return i
            }
        }
        return i
    }

    /// The connection ended (cleanly, as far as the transport knows). Completes a body
    /// delimited by the close; anything else unfinished is an error.
    mutating func finishAtEnd() throws(HTTPClientError) {
        switch state {
        case .done:
            return
        case .untilClose:
            state = .done
        case .head:
            // Nothing at all: no answer. Part of a head: an answer, whatever it was, cut or wrong.
            if !hasReceivedAnything { throw .closedWithoutAnswer("the upstream closed the connection without answering") }
            throw .malformedResponse("the upstream closed the connection before the response head was complete")
        default:
            throw .truncated("the upstream closed the connection before the end of the body")
        }
    }

    // MARK: - Head

    /// Takes head bytes up to the end of the head (or of `input`); returns where it stopped.
    private mutating func scanHead(_ input: UnsafeRawBufferPointer, from start: Int) throws(HTTPClientError) -> Int {
        if headBytes.isEmpty, let end = try ResponseParser.endOfHead(in: input, from: start) {
            // The usual case, a head that arrived whole: parsed where it lies, not copied.
            let head = UnsafeRawBufferPointer(rebasing: input[start..<end]).assumingMemoryBound(to: UInt8.self)
            if head.count > ResponseParser.maxHeadBytes { throw ResponseParser.headTooLarge }
            try takeHead(ResponseParser.parseHead(head))
            return end
        }
        if headBytes.isEmpty { headBytes.reserveCapacity(1024) } // one allocation for a usual head, not one per doubling
        var i = start
        while i < input.count {
            let rest = UnsafeRawBufferPointer(rebasing: input[i...])
            guard let found = memchr(rest.baseAddress!, 0x0A, rest.count) else {
                headBytes.append(contentsOf: rest)
                try checkHeadSize()
                return input.count
            }
            let lf = i + (UnsafeRawPointer(found) - rest.baseAddress!)
            headBytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i...lf]))
            i = lf + 1
            try checkHeadSize()
            var contentEnd = headBytes.count - 1
            if contentEnd > lineStart && headBytes[contentEnd - 1] == 0x0D { contentEnd -= 1 }
            guard contentEnd == lineStart else {
                lineStart = headBytes.count
                continue
            }
            guard lineStart > 0 else { throw ResponseParser.startsWithEmptyLine }
            let parsed = try headBytes.withUnsafeBufferPointer { bytes throws(HTTPClientError) in try ResponseParser.parseHead(bytes) }
            headBytes.removeAll(keepingCapacity: true)
            lineStart = 0
            try takeHead(parsed)
            if state != .head { return i }
        }
        return i
    }

    /// The status and length of the response head at the start of `bytes`, by the same
    /// rules as any response's (status line, fields, LF alone ending a line); nil while it
    /// is incomplete. For a proxy's answer to `CONNECT`, read on its own: after a 2xx comes
    /// the tunnel, not a body.
    static func statusOfHead(in bytes: UnsafeRawBufferPointer) throws(HTTPClientError) -> (status: Int, length: Int)? {
        guard !bytes.isEmpty, let end = try endOfHead(in: bytes, from: 0) else { return nil }
        if end > maxHeadBytes { throw headTooLarge }
        let (_, status, _) = try parseHead(UnsafeRawBufferPointer(rebasing: bytes[..<end]).assumingMemoryBound(to: UInt8.self))
        return (status, end)
    }

    /// Where the head that starts at `start` ends (just after the LF of its empty line), if
    /// that is in `input`.
    private static func endOfHead(in input: UnsafeRawBufferPointer, from start: Int) throws(HTTPClientError) -> Int? {
        var lineStart = start
        while lineStart < input.count, let found = memchr(input.baseAddress! + lineStart, 0x0A, input.count - lineStart) {
            let lf = UnsafeRawPointer(found) - input.baseAddress!
            if lf == lineStart || lf == lineStart + 1 && input[lineStart] == 0x0D { // an empty line
                guard lineStart > start else { throw startsWithEmptyLine }
                return lf + 1
            }
            lineStart = lf + 1
        }
        return nil
    }

    private static let startsWithEmptyLine = HTTPClientError.malformedResponse("the response starts with an empty line")
    private static let headTooLarge = HTTPClientError.malformedResponse("the response head exceeds \(ResponseParser.maxHeadBytes) bytes")

    private func checkHeadSize() throws(HTTPClientError) {
        if headBytes.count > ResponseParser.maxHeadBytes { throw ResponseParser.headTooLarge }
    }

    /// A complete head, parsed: the final one sets up the body; after an interim (1xx) one,
    /// the next head follows.
    private mutating func takeHead(_ parsed: (isHTTP11: Bool, status: Int, ResponseFields)) throws(HTTPClientError) {
        let (isHTTP11, status, headers) = parsed
        if status < 200 {
            guard status != 101 else { throw .malformedResponse("the upstream switched protocols unasked") }
            interimResponses += 1
            guard interimResponses <= ResponseParser.maxInterimResponses else { throw .malformedResponse("too many interim responses") }
            return // an interim response: the final one follows
        }
        head = Head(status: status, headers: headers)
        if !isHTTP11 { allowsReuse = false }
        try startBody(status: status, headers: headers, isHTTP11: isHTTP11)
    }

    /// Decides how the body is framed (RFC 9112 §6.3) and whether the connection may be reused.
    /// The framing fields are read in place, as bytes: no strings or arrays are made for them.
    private mutating func startBody(status: Int, headers: ResponseFields, isHTTP11: Bool) throws(HTTPClientError) {
        var chunked = false, length: Int?
        try headers.forEachField { (name, value) throws(HTTPClientError) in
            switch name.count {
            case 10 where ResponseParser.equalsIgnoringASCIICase(name[...], "connection"):
                if ResponseParser.hasToken("close", in: value) { allowsReuse = false }
            case 14 where ResponseParser.equalsIgnoringASCIICase(name[...], "content-length"):
                try ResponseParser.contentLength(value, into: &length)
            case 17 where ResponseParser.equalsIgnoringASCIICase(name[...], "transfer-encoding"):
                // An HTTP/1.0 recipient may not know it: a message that has it anyway must be
                // treated as badly framed (RFC 9112 §6.1), whatever else frames it.
                guard isHTTP11 else { throw .malformedResponse("Transfer-Encoding in an HTTP/1.0 response") }
                // Only chunked, once: nothing else was asked for (no TE field goes out).
                guard !chunked, ResponseParser.equalsIgnoringASCIICase(ResponseParser.trimmingOWS(value), "chunked") else {
                    throw .malformedResponse("a transfer coding other than chunked")
                }
                chunked = true
            default:
                break
            }
        }
        if isResponseToHEAD || status == 204 || status == 304 {
            // A server that sends the GET's body to HEAD anyway (a common fault) could have it
            // arrive after the connection went back to the pool, to be read as the next
            // request's answer: a response to HEAD ends its connection.
            if isResponseToHEAD { allowsReuse = false }
            // Likewise a 204 or 304 whose fields frame a body (a 204 must not, a 304's length
            // is the representation's): a server that thinks it sends one may send it late.
            if chunked || (length ?? 0) > 0 { allowsReuse = false }
            state = .done
        } else if chunked {
            if length != nil { allowsReuse = false } // both framings: chunked counts (RFC 9112 §6.3)
            state = .chunkSize
        } else if let length {
            declaredLength = length
            state = length == 0 ? .done : .fixed(remaining: length)
        } else {
            allowsReuse = false
            bodyEndsAtClose = true
            state = .untilClose
        }
    }

    /// One Content-Length field's value, a comma-separated list: each element must be a
    /// plain decimal and agree with `length` (the earlier fields'), which it then sets.
    private static func contentLength(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, into length: inout Int?) throws(HTTPClientError) {
        var start = bytes.startIndex
        while true {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: ",")) ?? bytes.endIndex
            guard let element = decimal(bytes[start..<end]), length == nil || length == element else {
                throw .malformedResponse("an invalid or ambiguous Content-Length")
            }
            length = element
            guard end < bytes.endIndex else { return }
            start = end + 1
        }
    }

    /// A Content-Length value: digits only, with spaces and tabs around them but not between;
    /// nil if it is not.
    private static func decimal(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Int? {
        var value = 0, digits = 0
        for byte in trimmingOWS(bytes) {
            guard byte >= 0x30 && byte <= 0x39, digits < 18 else { return nil }
            value = value * 10 + Int(byte - 0x30)
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    /// Whether the comma-separated `bytes` hold `token` (lower case; compared ignoring ASCII case).
    private static func hasToken(_ token: StaticString, in bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: ",")) ?? bytes.endIndex
            if equalsIgnoringASCIICase(trimmingOWS(bytes[start..<end]), token) { return true }
            start = end + 1
        }
        return false
    }

    /// `bytes` without leading and trailing spaces and tabs (RFC 9110 OWS).
    private static func trimmingOWS(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Slice<UnsafeBufferPointer<UInt8>> {
        var start = bytes.startIndex, end = bytes.endIndex
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        return bytes[start..<end]
    }

    /// Whether `bytes` spell `lowercase` (lower-case ASCII), letters in either case.
    private static func equalsIgnoringASCIICase(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        let expected = lowercase.utf8Start
        for (offset, byte) in bytes.enumerated() where byte != expected[offset] {
            // Only a letter may differ, and only in case (bit 5).
            guard byte | 0x20 == expected[offset], expected[offset] >= UInt8(ascii: "a"), expected[offset] <= UInt8(ascii: "z") else { return false }
        }
        return true
    }

    /// The status line and fields of a complete head (its lines end in LF or CRLF).
    private static func parseHead(_ bytes: UnsafeBufferPointer<UInt8>) throws(HTTPClientError) -> (isHTTP11: Bool, status: Int, ResponseFields) {
        var fields = ResponseFields(minimumByteCapacity: bytes.count)
        var status: (isHTTP11: Bool, code: Int)?
        var start = 0
        while start < bytes.count {
            var end = bytes.count
            if let found = memchr(bytes.baseAddress! + start, 0x0A, bytes.count - start) {
                end = UnsafeRawPointer(found).assumingMemoryBound(to: UInt8.self) - bytes.baseAddress!
            }
            let next = end + 1
            if end > start && bytes[end - 1] == 0x0D { end -= 1 }
            if end > start {
                let line = UnsafeBufferPointer(rebasing: bytes[start..<end])
                // No control characters but HTAB (a bare CR included).
                guard ByteClass.fieldValue.containsAll(line) else {
                    throw .malformedResponse("control characters or a bare CR in the response head")
                }
                if status == nil { status = try statusLine(line) } else { try field(line, into: &fields) }
            }
            start = next
        }
        guard let status else { throw .malformedResponse("the response has no status line") }
        return (status.isHTTP11, status.code, fields)
    }

    /// "HTTP/1.1 200 OK" → (true, 200).
    private static func statusLine(_ bytes: UnsafeBufferPointer<UInt8>) throws(HTTPClientError) -> (isHTTP11: Bool, code: Int) {
        guard bytes.count >= 12, bytes.starts(with: "HTTP/1.".utf8), bytes[7] == 0x30 || bytes[7] == 0x31, bytes[8] == 0x20,
              bytes[9...11].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), bytes.count == 12 || bytes[12] == 0x20 else {
            throw .malformedResponse("the status line is not HTTP/1.x with a three-digit code")
        }
        let code = bytes[9...11].reduce(0) { $0 * 10 + Int($1 - 0x30) }
        // RFC 9110 §15: codes outside 100–599 are invalid; one would reach the browser as the EHR's.
        guard (100...599).contains(code) else { throw .malformedResponse("the status code is outside 100–599") }
        return (bytes[7] == 0x31, code)
    }

    /// One field line; an obs-fold line continues the previous value.
    private static func field(_ line: UnsafeBufferPointer<UInt8>, into fields: inout ResponseFields) throws(HTTPClientError) {
        if line[0] == 0x20 || line[0] == 0x09 {
            guard !fields.isEmpty else { throw .malformedResponse("a continuation line before any header") }
            fields.continueLast(with: trimmingOWS(line[...]))
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0, ByteClass.token.containsAll(UnsafeBufferPointer(rebasing: line[..<colon])) else {
            throw .malformedResponse("a response header name is not a token")
        }
        fields.append(name: UnsafeBufferPointer(rebasing: line[..<colon]), value: trimmingOWS(line[(colon + 1)...]))
    }

    // MARK: - Chunked framing

    /// Takes bytes of a chunk-size line, the CRLF after chunk data, or a trailer line.
    private mutating func scanLine(_ input: UnsafeRawBufferPointer, from start: Int) throws(HTTPClientError) -> Int {
        let rest = UnsafeRawBufferPointer(rebasing: input[start...])
        guard let found = memchr(rest.baseAddress!, 0x0A, rest.count) else {
            try append(rest)
            return input.count
        }
        let lf = start + (UnsafeRawPointer(found) - rest.baseAddress!)
        try append(UnsafeRawBufferPointer(rebasing: input[start..<lf]))
        if line.last == 0x0D { line.removeLast() }
        guard !line.contains(0x0D) else { throw .malformedResponse("a bare CR in the chunked framing") }
        switch state {
        case .chunkSize:
            try chunkSizeLine()
        case .chunkDataEnd:
            guard line.isEmpty else { throw .malformedResponse("chunk data longer than its declared size") }
            state = .chunkSize
        default: // trailers: read and dropped; the empty line ends the response
            if line.isEmpty { state = .done }
        }
        line.removeAll(keepingCapacity: true)
        return lf + 1
    }

    private mutating func append(_ bytes: UnsafeRawBufferPointer) throws(HTTPClientError) {
        line.append(contentsOf: bytes)
        if state == .trailers {
            trailerBytes += bytes.count + 1
            if trailerBytes > ResponseParser.maxHeadBytes { throw .malformedResponse("the trailer section is too large") }
        } else if line.count > ResponseParser.maxChunkLineBytes {
            throw .malformedResponse("a chunk-size line is too long")
        }
    }

    /// `1a;ext=1` → a chunk of 26 bytes; `0` → the last chunk, then the trailers.
    private mutating func chunkSizeLine() throws(HTTPClientError) {
        var size = 0, digits = 0, index = 0
        while index < line.count, let value = hexValue(line[index]) {
            guard digits < 15 else { throw .malformedResponse("a chunk size too large") }
            size = size << 4 | value
            digits += 1
            index += 1
        }
        guard digits > 0 else { throw .malformedResponse("a chunk-size line without a size") }
        while index < line.count, line[index] == 0x20 || line[index] == 0x09 { index += 1 }
        guard index == line.count || line[index] == UInt8(ascii: ";") else { throw .malformedResponse("a malformed chunk-size line") }
        guard line.withUnsafeBufferPointer({ ByteClass.fieldValue.containsAll(UnsafeBufferPointer(rebasing: $0[index...])) }) else {
            throw .malformedResponse("control characters in a chunk extension")
        }
        state = size == 0 ? .trailers : .chunkData(remaining: size)
    }

    private func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: Int(byte - 0x30)
        case 0x41...0x46: Int(byte - 0x41 + 10)
        case 0x61...0x66: Int(byte - 0x61 + 10)
        default: nil
        }
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (RFC 9110 OWS).
    func strippingOWS() -> String {
        var slice = Substring(self)
        while slice.first == " " || slice.first == "\t" { slice = slice.dropFirst() }
        while slice.last == " " || slice.last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
