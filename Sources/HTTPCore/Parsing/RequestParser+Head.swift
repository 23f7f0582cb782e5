extension RequestParser {
    enum HeadResult {
        case needMore(consumed: Int)
        case failure(ParseError)
        case head(ParsedRequest, consumed: Int, body: State, expectsContinue: Bool)
    }

    typealias RequestLine = (method: String, target: String, version: HTTPVersion)

    /// How far a head that has not arrived whole has been read. A client may send its head a
    /// byte at a time: resuming here keeps each read's work proportional to the bytes it
    /// brought, where starting over would cost the whole head again on every read (quadratic
    /// in its size). Offsets count from the head's first byte, where the buffer of every
    /// later call starts (until the head is complete, nothing past it is consumed).
    struct HeadProgress: Sendable {
        /// The request line, once its CRLF has arrived.
        var line: RequestLine?
        /// Just past the request line's CRLF: where the header block starts.
        var headerStart = 0
        /// The fields of the header lines that have arrived whole.
        var headers = HTTPHeaders()
        /// Where the line that has not arrived whole starts.
        var lineStart = 0
        /// The first byte of that line not yet checked (a CR at the end of the bytes so far is
        /// checked again once the byte after it is known).
        var checked = 0
    }

    /// What resuming a head found.
    private enum HeadScan {
        case needMore
        case failure(ParseError)
        case complete(end: Int)
    }

    /// Parses a request line and header block. The request comes back once the whole head is
    /// here; until then each call checks only the bytes that are new (see `HeadProgress`).
    /// Empty lines before a request are consumed on their own.
    mutating func parseHead(_ bytes: UnsafeBufferPointer<UInt8>) -> HeadResult {
        let n = bytes.count
        var i = 0
        // RFC 9112 §2.2: ignore empty lines before a request-line.
        while i + 1 < n, bytes[i] == CR, bytes[i + 1] == LF { i += 2 }
        if i < n, bytes[i] == LF { return .failure(.bad("bare LF")) }
        if i == n || (i + 1 == n && bytes[i] == CR) { return .needMore(consumed: i) }
        if !ByteClass.token[Int(bytes[i])] { return .failure(.bad("invalid method")) }

        let head = UnsafeBufferPointer(rebasing: bytes[i...])
        let scan = progress.line == nil ? scanRequestLine(head) : scanFields(head)
        switch scan {
        case .needMore:
            return .needMore(consumed: i)
        case let .failure(error):
            return .failure(error)
        case let .complete(end):
            let (line, headers) = (progress.line!, progress.headers)
            progress = HeadProgress()
            return interpret(line: line, headers: headers, consumed: i + end)
        }
    }

    /// A HEAD request's first bytes.
    static let headPrefix = Array("HEAD ".utf8)

    /// Reads the request line once its CRLF is here, then goes on to the fields; until then,
    /// refuses what is already certain to be refused.
    private mutating func scanRequestLine(_ b: UnsafeBufferPointer<UInt8>) -> HeadScan {
        let n = b.count
        let from = progress.checked
        // Known before the line is whole, so that a refusal of a HEAD request (414, 400) has
        // no body either (RFC 9110 §9.3.2).
        if requestMethod == nil, n >= 5, RequestParser.headPrefix.elementsEqual(UnsafeBufferPointer(rebasing: b[0..<5])) {
            requestMethod = "HEAD"
        }
        guard let lf = findLineEnd(in: b, from: from, end: limits.maxRequestLineBytes + 2) else {
            if n > limits.maxRequestLineBytes + 1 { return .failure(ParseError(.uriTooLong, "request line too long")) }
            if let cr = find(CR, in: b, from: from, limit: n), cr + 1 < n { return .failure(.bad("bare CR")) }
            progress.checked = b[n - 1] == CR ? n - 1 : n
            return .needMore
        }
        guard lf > 0, b[lf - 1] == CR else { return .failure(.bad("bare LF in request line")) }
        switch parseRequestLine(b, from: 0, to: lf - 1) {
        case let .success(line):
            progress.line = line
            requestMethod = line.method
        case let .failure(e): return .failure(e)
        }
        progress.headers = HTTPHeaders(minimumCapacity: 16) // browsers send 10 to 15 fields: one allocation, no regrowth
        (progress.headerStart, progress.lineStart, progress.checked) = (lf + 1, lf + 1, lf + 1)
        return scanFields(b)
    }

    /// Reads each header line whose LF is here, up to the empty line that ends the head.
    private mutating func scanFields(_ b: UnsafeBufferPointer<UInt8>) -> HeadScan {
        let n = b.count
        let headerStart = progress.headerStart
        var s = progress.lineStart
        while true {
            if s - headerStart > limits.maxHeaderBytes { return .failure(ParseError(.headerFieldsTooLarge, "header block too large")) }
            if s + 1 < n, b[s] == CR, b[s + 1] == LF { s += 2; break }
            if s < n, b[s] == LF { return .failure(.bad("bare LF")) }
            if s + 1 < n, b[s] == CR { return .failure(.bad("bare CR")) }
            let from = max(s, progress.checked)
            guard let eol = findLineEnd(in: b, from: from, end: s + limits.maxHeaderBytes + 2) else {
                // + 1: the CR of the final CRLF may already be here (that CRLF is not counted).
                if n - headerStart > limits.maxHeaderBytes + 1 { return .failure(ParseError(.headerFieldsTooLarge, "header block too large")) }
                if let e = scanFieldPrefix(b, lineStart: s, from: from, to: n) { return .failure(e) }
                progress.lineStart = s
                progress.checked = b[n - 1] == CR ? n - 1 : n
                return .needMore
            }
            guard b[eol - 1] == CR, eol - 1 >= s else { return .failure(.bad("bare LF in header")) }
            switch parseField(b, from: s, to: eol - 1) {
            case let .failure(e): return .failure(e)
            case let .success(field): progress.headers.add(field.name, field.value)
            }
            if progress.headers.count > limits.maxHeaderCount { return .failure(ParseError(.headerFieldsTooLarge, "too many header fields")) }
            s = eol + 1
        }
        if s - headerStart - 2 > limits.maxHeaderBytes { return .failure(ParseError(.headerFieldsTooLarge, "header block too large")) }
        return .complete(end: s)
    }

    /// The first LF in `b[from..<end]`, counting the bytes looked at in `bytesSearched`.
    mutating func findLineEnd(in b: UnsafeBufferPointer<UInt8>, from: Int, end: Int) -> Int? {
        let lf = find(LF, in: b, from: from, limit: end - from)
        bytesSearched += (lf.map { $0 + 1 } ?? max(from, min(b.count, end))) - from
        return lf
    }

    /// Checks a partial header line that starts at `lineStart` for bytes that are already
    /// certain to be refused; the bytes before `from` were checked by an earlier call.
    private func scanFieldPrefix(_ b: UnsafeBufferPointer<UInt8>, lineStart: Int, from: Int, to: Int) -> ParseError? {
        if lineStart < to, b[lineStart] == SP || b[lineStart] == HT { return .bad("obs-fold") }
        var k = from
        while k < to {
            let c = b[k]
            if c == CR { if k + 1 < to { return .bad("bare CR") } } else if !ByteClass.fieldValue[Int(c)] { return .bad("control byte in header") }
            k += 1
        }
        return nil
    }

    func find(_ byte: UInt8, in b: UnsafeBufferPointer<UInt8>, from: Int, limit: Int) -> Int? {
        let end = min(b.count, from + limit)
        var k = from
        while k < end {
            if b[k] == byte { return k }
            k += 1
        }
        return nil
    }

    private func parseRequestLine(_ b: UnsafeBufferPointer<UInt8>, from: Int, to end: Int)
        -> Result<(method: String, target: String, version: HTTPVersion), ParseError> {
        var k = from
        while k < end, ByteClass.token[Int(b[k])] { k += 1 }
        guard k < end, b[k] == SP, k > from else { return .failure(.bad("invalid method")) }
        let method = String(decoding: UnsafeBufferPointer(rebasing: b[from..<k]), as: UTF8.self)
        k += 1
        let targetStart = k
        while k < end, ByteClass.target[Int(b[k])] { k += 1 }
        guard k < end, b[k] == SP, k > targetStart else { return .failure(.bad("invalid request target")) }
        let target = String(decoding: UnsafeBufferPointer(rebasing: b[targetStart..<k]), as: UTF8.self)
        k += 1
        let v = UnsafeBufferPointer(rebasing: b[k..<end])
        guard v.count == 8, v[0] == 0x48, v[1] == 0x54, v[2] == 0x54, v[3] == 0x50, v[4] == 0x2F,
              v[6] == 0x2E, (0x30...0x39).contains(v[5]), (0x30...0x39).contains(v[7])
        else { return .failure(.bad("invalid HTTP version")) }
        switch (v[5], v[7]) {
        case (0x31, 0x30): return .success((method, target, .http10))
        // A later HTTP/1 minor version is read as the highest this server implements (RFC 9110 §2.5).
        case (0x31, 0x31...0x39): return .success((method, target, .http11))
        default: return .failure(ParseError(.httpVersionNotSupported, "HTTP version not supported"))
        }
    }

    private func parseField(_ b: UnsafeBufferPointer<UInt8>, from: Int, to end: Int) -> Result<(name: String, value: String), ParseError> {
        if b[from] == SP || b[from] == HT { return .failure(.bad("obs-fold")) }
        var k = from
        while k < end, ByteClass.token[Int(b[k])] { k += 1 }
        guard k < end else { return .failure(.bad("header field without colon")) }
        if b[k] == SP || b[k] == HT { return .failure(.bad("whitespace before colon")) }
        guard b[k] == UInt8(ascii: ":"), k > from else { return .failure(.bad("invalid header field name")) }
        let name = String(decoding: UnsafeBufferPointer(rebasing: b[from..<k]), as: UTF8.self)
        k += 1
        while k < end, b[k] == SP || b[k] == HT { k += 1 }
        var valueEnd = end
        while valueEnd > k, b[valueEnd - 1] == SP || b[valueEnd - 1] == HT { valueEnd -= 1 }
        var j = k
        while j < valueEnd {
            guard ByteClass.fieldValue[Int(b[j])] else { return .failure(.bad("invalid byte in header value")) }
            j += 1
        }
        let value = String(decoding: UnsafeBufferPointer(rebasing: b[k..<valueEnd]), as: UTF8.self)
        return .success((name, value))
    }
}
