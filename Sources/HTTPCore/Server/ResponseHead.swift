/// Serializes a response's status line and header fields.
enum ResponseHead {
    /// Writes the head into `out`. `framing` tells how the body is delimited; `version` is the
    /// request's (an HTTP/1.0 client is told a kept-alive connection stays open). The status
    /// line says HTTP/1.1 whatever the request's version, the highest this server implements
    /// (RFC 9110 §2.5).
    static func write(_ response: Response, version: HTTPVersion, framing: Framing, keepAlive: Bool,
                      date: [UInt8], into out: inout [UInt8]) {
        out.append(http11)
        appendDecimal(response.status.code, to: &out)
        out.append(0x20)
        out.appendUTF8(response.status.reason)
        out.append(crlf)
        for field in response.headers {
            let name = field.name, value = field.value
            if isFramingHeader(name) { continue }
            out.appendUTF8(name)
            out.append(colonSpace)
            appendSanitized(value, to: &out)
            out.append(crlf)
        }
        out.append(dateName)
        out.append(contentsOf: date)
        out.append(crlf)
        switch framing {
        case let .length(n):
            out.append(contentLengthName)
            appendDecimal(n, to: &out)
            out.append(crlf)
        case .chunked:
            out.append(chunkedHeader)
        case .none, .closeDelimited:
            break
        }
        if !keepAlive {
            out.append(connectionClose)
        } else if version == .http10 {
            out.append(connectionKeepAlive)
        }
        out.append(crlf)
    }

    enum Framing {
        case length(Int)
        case chunked
        case closeDelimited
        /// No body and no length (1xx, 204, 304 without one).
        case none
    }

    private static func isFramingHeader(_ name: String) -> Bool {
        switch name.utf8.count {
        case 4, 10, 14, 17: break // Date; Connection, Keep-Alive; Content-Length; Transfer-Encoding
        default: return false
        }
        return name.equalsIgnoringASCIICase("Content-Length") || name.equalsIgnoringASCIICase("Transfer-Encoding")
            || name.equalsIgnoringASCIICase("Connection") || name.equalsIgnoringASCIICase("Date")
            || name.equalsIgnoringASCIICase("Keep-Alive")
    }

    /// Header values never carry CR, LF or NUL onto the wire (response splitting).
    private static func appendSanitized(_ value: String, to out: inout [UInt8]) {
        var value = value // withUTF8 is mutating; a native string is not copied
        value.withUTF8 { bytes in
            guard bytes.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) else {
                out.append(contentsOf: bytes)
                return
            }
            for b in bytes { out.append(b == 0x0D || b == 0x0A || b == 0x00 ? 0x20 : b) }
        }
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
        var shift = (Int.bitWidth - value.leadingZeroBitCount - 1) / 4 * 4
        if value == 0 { out.append(0x30); return }
        while shift >= 0 {
            let digit = UInt8((value >> shift) & 0xF)
            out.append(digit < 10 ? 0x30 + digit : 0x57 + digit)
            shift -= 4
        }
    }

    // StaticStrings, not arrays: appending them costs no reference counting.
    static let http11: StaticString = "HTTP/1.1 "
    static let crlf: StaticString = "\r\n"
    static let colonSpace: StaticString = ": "
    static let dateName: StaticString = "Date: "
    static let contentLengthName: StaticString = "Content-Length: "
    static let chunkedHeader: StaticString = "Transfer-Encoding: chunked\r\n"
    static let connectionClose: StaticString = "Connection: close\r\n"
    static let connectionKeepAlive: StaticString = "Connection: keep-alive\r\n"
    static let continue100: StaticString = "HTTP/1.1 100 Continue\r\n\r\n"
    static let lastChunk: StaticString = "0\r\n\r\n"
}

extension Array where Element == UInt8 {
    @inline(__always)
    mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { append(contentsOf: $0) }
    }

    /// Appends the UTF-8 bytes of `text` in one copy (appending its `utf8` view goes byte
    /// by byte).
    @inline(__always)
    mutating func appendUTF8(_ text: String) {
        var text = text
        text.withUTF8 { append(contentsOf: $0) }
    }
}
