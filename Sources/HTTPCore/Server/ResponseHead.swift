/// Serializes a response's status line and header fields.
enum ResponseHead {
    /// Writes the head into `out`. `framing` tells how the body is delimited.
    static func write(_ response: Response, version: HTTPVersion, framing: Framing, keepAlive: Bool,
                      date: [UInt8], into out: inout [UInt8]) {
        out.append(contentsOf: version == .http10 ? http10 : http11)
        appendDecimal(response.status.code, to: &out)
        out.append(0x20)
        out.append(contentsOf: response.status.reason.utf8)
        out.append(contentsOf: crlf)
        for (name, value) in response.headers {
            if isFramingHeader(name) { continue }
            out.append(contentsOf: name.utf8)
            out.append(contentsOf: colonSpace)
            appendSanitized(value, to: &out)
            out.append(contentsOf: crlf)
        }
        out.append(contentsOf: dateName)
        out.append(contentsOf: date)
        out.append(contentsOf: crlf)
        switch framing {
        case let .length(n):
            out.append(contentsOf: contentLengthName)
            appendDecimal(n, to: &out)
            out.append(contentsOf: crlf)
        case .chunked:
            out.append(contentsOf: chunkedHeader)
        case .none, .closeDelimited:
            break
        }
        if !keepAlive {
            out.append(contentsOf: connectionClose)
        } else if version == .http10 {
            out.append(contentsOf: connectionKeepAlive)
        }
        out.append(contentsOf: crlf)
    }

    enum Framing {
        case length(Int)
        case chunked
        case closeDelimited
        /// No body and no length (1xx, 204, 304 without one).
        case none
    }

    private static func isFramingHeader(_ name: String) -> Bool {
        name.equalsIgnoringASCIICase("Content-Length") || name.equalsIgnoringASCIICase("Transfer-Encoding")
            || name.equalsIgnoringASCIICase("Connection") || name.equalsIgnoringASCIICase("Date")
            || name.equalsIgnoringASCIICase("Keep-Alive")
    }

    /// Header values never carry CR, LF or NUL onto the wire (response splitting).
    private static func appendSanitized(_ value: String, to out: inout [UInt8]) {
        for b in value.utf8 { out.append(b == 0x0D || b == 0x0A || b == 0x00 ? 0x20 : b) }
    }

    static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        if value == 0 { out.append(0x30); return }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var v = value
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while v > 0 {
                buffer[count] = UInt8(0x30 + v % 10)
                v /= 10
                count += 1
            }
            for k in stride(from: count - 1, through: 0, by: -1) { out.append(buffer[k]) }
        }
    }

    static func appendHex(_ value: Int, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        var shift = (Int.bitWidth - value.leadingZeroBitCount - 1) / 4 * 4
        if value == 0 { out.append(0x30); return }
        while shift >= 0 {
            out.append(hex[(value >> shift) & 0xF])
            shift -= 4
        }
    }

    static let http11 = Array("HTTP/1.1 ".utf8)
    static let http10 = Array("HTTP/1.0 ".utf8)
    static let crlf = Array("\r\n".utf8)
    static let colonSpace = Array(": ".utf8)
    static let dateName = Array("Date: ".utf8)
    static let contentLengthName = Array("Content-Length: ".utf8)
    static let chunkedHeader = Array("Transfer-Encoding: chunked\r\n".utf8)
    static let connectionClose = Array("Connection: close\r\n".utf8)
    static let connectionKeepAlive = Array("Connection: keep-alive\r\n".utf8)
    static let continue100 = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
}
