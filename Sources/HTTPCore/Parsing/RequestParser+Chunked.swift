extension RequestParser {
    enum ChunkSizeResult {
        case needMore
        case failure(ParseError)
        /// The chunk's size, the line's length, and how many of its bytes were extensions.
        case size(Int, consumed: Int, extensionBytes: Int)
    }

    enum TrailerResult {
        /// The line is unfinished; its first `searched` bytes hold no LF.
        case needMore(searched: Int)
        case failure(ParseError)
        case line(consumed: Int)
        case end(consumed: Int)
    }

    static let maxChunkSizeLine = 1024

    /// Parses `chunk-size [chunk-ext] CRLF` (RFC 9112 §7.1).
    func parseChunkSize(_ b: UnsafeBufferPointer<UInt8>) -> ChunkSizeResult {
        guard let lf = find(LF, in: b, from: 0, limit: RequestParser.maxChunkSizeLine) else {
            if b.count >= RequestParser.maxChunkSizeLine { return .failure(.bad("chunk size line too long")) }
            for k in 0..<b.count where b[k] == CR && k + 1 < b.count { return .failure(.bad("bare CR in chunk size")) }
            return .needMore
        }
        guard lf > 0, b[lf - 1] == CR else { return .failure(.bad("bare LF in chunk size")) }
        var k = 0
        var size = 0, significant = 0 // leading zeros are allowed (1*HEXDIG) and do not count
        while k < lf - 1, let digit = PercentEncoding.hexValue(b[k]) {
            if size > 0 || digit > 0 { significant += 1 }
            guard significant < 16 else { return .failure(.bad("chunk size too large")) }
            size = size << 4 | Int(digit)
            k += 1
        }
        guard k > 0 else { return .failure(.bad("malformed chunk size")) }
        // Extensions are ignored, but must be well-formed (RFC 9112 §7.1.1).
        if k < lf - 1, !RequestParser.validChunkExtensions(UnsafeBufferPointer(rebasing: b[k..<(lf - 1)])) {
            return .failure(.bad("malformed chunk extension"))
        }
        return .size(size, consumed: lf + 1, extensionBytes: lf - 1 - k)
    }

    /// Parses one trailer field line, or the empty line that ends the message. The first
    /// `searched` bytes of `b` were searched for the line's end by an earlier call: a line
    /// sent in pieces is searched once, not again from its start with every piece.
    mutating func parseTrailerLine(_ b: UnsafeBufferPointer<UInt8>, count: Int, size: Int, searched: Int) -> TrailerResult {
        if b.count >= 2, b[0] == CR, b[1] == LF { return .end(consumed: 2) }
        if b.count >= 1, b[0] == LF { return .failure(.bad("bare LF in trailer")) }
        if b.count >= 2, b[0] == CR { return .failure(.bad("bare CR in trailer")) }
        if b.count >= 1, b[0] == SP || b[0] == HT { return .failure(.bad("obs-fold in trailer")) }
        // Trailer lines may total maxHeaderBytes; the final CRLF is not counted (its CR may be here).
        guard let lf = findLineEnd(in: b, from: searched, end: limits.maxHeaderBytes - size) else {
            if size + b.count > limits.maxHeaderBytes + 1 { return .failure(ParseError(.headerFieldsTooLarge, "trailers too large")) }
            return .needMore(searched: b.count)
        }
        guard lf > 0, b[lf - 1] == CR else { return .failure(.bad("bare LF in trailer")) }
        var k = 0
        while k < lf - 1, ByteClass.token[Int(b[k])] { k += 1 }
        guard k > 0, k < lf - 1, b[k] == UInt8(ascii: ":") else { return .failure(.bad("malformed trailer field")) }
        k += 1
        while k < lf - 1 {
            guard ByteClass.fieldValue[Int(b[k])] else { return .failure(.bad("control byte in trailer")) }
            k += 1
        }
        if count + 1 > limits.maxHeaderCount { return .failure(ParseError(.headerFieldsTooLarge, "too many trailer fields")) }
        return .line(consumed: lf + 1)
    }

    /// `*( BWS ";" BWS token [ BWS "=" BWS ( token / quoted-string ) ] )`
    static func validChunkExtensions(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        var k = 0
        func skipBWS() { while k < b.count, b[k] == SP || b[k] == HT { k += 1 } }
        func token() -> Bool {
            let start = k
            while k < b.count, ByteClass.token[Int(b[k])] { k += 1 }
            return k > start
        }
        while k < b.count {
            skipBWS()
            guard k < b.count, b[k] == UInt8(ascii: ";") else { return false }
            k += 1
            skipBWS()
            guard token() else { return false }
            skipBWS()
            guard k < b.count, b[k] == UInt8(ascii: "=") else { continue }
            k += 1
            skipBWS()
            if k < b.count, b[k] == UInt8(ascii: "\"") {
                k += 1
                var closed = false
                while k < b.count {
                    let c = b[k]
                    if c == UInt8(ascii: "\"") { closed = true; k += 1; break }
                    if c == UInt8(ascii: "\\") {
                        k += 1
                        guard k < b.count, ByteClass.fieldValue[Int(b[k])] else { return false }
                    } else if !ByteClass.fieldValue[Int(c)] {
                        return false
                    }
                    k += 1
                }
                guard closed else { return false }
            } else {
                guard token() else { return false }
            }
        }
        return true
    }
}
