extension RequestParser {
    enum HeadResult {
        case needMore(consumed: Int)
        case failure(ParseError)
        case head(ParsedRequest, consumed: Int, body: State, expectsContinue: Bool)
    }

    /// Parses a request line and header block, all or nothing (empty lines before a request
    /// are consumed on their own).
    func parseHead(_ b: UnsafeBufferPointer<UInt8>) -> HeadResult {
        let n = b.count
        var i = 0
        // RFC 9112 §2.2: ignore empty lines before a request-line.
        while i + 1 < n, b[i] == CR, b[i + 1] == LF { i += 2 }
        if i < n, b[i] == LF { return .failure(.bad("bare LF")) }
        if i == n || (i + 1 == n && b[i] == CR) { return .needMore(consumed: i) }
        if !ByteClass.token[Int(b[i])] { return .failure(.bad("invalid method")) }

        // Request line.
        let lineStart = i
        guard let lf = find(LF, in: b, from: i, limit: limits.maxRequestLineBytes + 2) else {
            if n - i > limits.maxRequestLineBytes + 1 { return .failure(ParseError(.uriTooLong, "request line too long")) }
            if let cr = find(CR, in: b, from: i, limit: n), cr + 1 < n, b[cr + 1] != LF { return .failure(.bad("bare CR")) }
            return .needMore(consumed: lineStart)
        }
        guard lf > i, b[lf - 1] == CR else { return .failure(.bad("bare LF in request line")) }
        let line: (method: String, target: String, version: HTTPVersion)
        switch parseRequestLine(b, from: i, to: lf - 1) {
        case let .success(l): line = l
        case let .failure(e): return .failure(e)
        }

        // Header fields.
        var headers = HTTPHeaders(minimumCapacity: 16) // browsers send 10 to 15 fields: one allocation, no regrowth
        var s = lf + 1
        let headerStart = s
        while true {
            if s - headerStart > limits.maxHeaderBytes { return .failure(ParseError(.headerFieldsTooLarge, "header block too large")) }
            if s + 1 < n, b[s] == CR, b[s + 1] == LF { s += 2; break }
            if s < n, b[s] == LF { return .failure(.bad("bare LF")) }
            if s + 1 < n, b[s] == CR { return .failure(.bad("bare CR")) }
            guard let eol = find(LF, in: b, from: s, limit: limits.maxHeaderBytes + 2) else {
                // + 1: the CR of the final CRLF may already be here (that CRLF is not counted).
                if n - headerStart > limits.maxHeaderBytes + 1 { return .failure(ParseError(.headerFieldsTooLarge, "header block too large")) }
                if let e = scanFieldPrefix(b, from: s, to: n) { return .failure(e) }
                return .needMore(consumed: lineStart)
            }
            guard b[eol - 1] == CR, eol - 1 >= s else { return .failure(.bad("bare LF in header")) }
            switch parseField(b, from: s, to: eol - 1) {
            case let .failure(e): return .failure(e)
            case let .success(field): headers.add(field.name, field.value)
            }
            if headers.count > limits.maxHeaderCount { return .failure(ParseError(.headerFieldsTooLarge, "too many header fields")) }
            s = eol + 1
        }
        if s - headerStart - 2 > limits.maxHeaderBytes { return .failure(ParseError(.headerFieldsTooLarge, "header block too large")) }
        return interpret(line: line, headers: headers, consumed: s)
    }

    /// Checks a partial header line for bytes that are already certain to be refused.
    private func scanFieldPrefix(_ b: UnsafeBufferPointer<UInt8>, from: Int, to: Int) -> ParseError? {
        if from < to, b[from] == SP || b[from] == HT { return .bad("obs-fold") }
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
        case (0x31, 0x31): return .success((method, target, .http11))
        case (0x31, 0x30): return .success((method, target, .http10))
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
