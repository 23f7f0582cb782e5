/// Builds the response head from the header lines libcurl hands over one by one: status
/// lines, fields, and the empty line that ends each head. Interim 1xx heads (100 Continue,
/// 103 Early Hints) are dropped; lines after the final head (chunked trailers) are ignored.
struct ResponseHead {
    private(set) var status = 0
    private(set) var headers: [(name: String, value: String)] = []
    /// The final head has ended.
    private(set) var isComplete = false

    /// Feeds one line, with or without its CRLF. Returns true when it completed the final head.
    mutating func consume(_ line: UnsafeRawBufferPointer) -> Bool {
        guard !isComplete else { return false }
        var end = line.count
        while end > 0, line[end - 1] == UInt8(ascii: "\n") || line[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        let bytes = UnsafeRawBufferPointer(rebasing: line[..<end])
        if bytes.isEmpty {
            if status >= 200 {
                isComplete = true
                return true
            }
            // The end of an interim head (or of nothing): start over.
            status = 0
            headers.removeAll(keepingCapacity: true)
            return false
        }
        if bytes.starts(with: "HTTP/".utf8) {
            status = ResponseHead.statusCode(bytes)
            headers.removeAll(keepingCapacity: true)
        } else if bytes[0] == UInt8(ascii: " ") || bytes[0] == UInt8(ascii: "\t") {
            // obs-fold: a continuation of the previous field's value.
            if !headers.isEmpty {
                headers[headers.count - 1].value += " " + ResponseHead.trimmed(bytes)
            }
        } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
            let name = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<colon]), as: UTF8.self)
            let value = ResponseHead.trimmed(UnsafeRawBufferPointer(rebasing: bytes[(colon + 1)...]))
            headers.append((name: name, value: value))
        }
        return false
    }

    /// The Content-Length the final head declares, if any.
    var contentLength: Int? { headers.firstValue(named: "Content-Length").flatMap { Int($0) } }

    /// "HTTP/1.1 204 No Content" → 204; 0 when there is no three-digit code.
    private static func statusCode(_ line: UnsafeRawBufferPointer) -> Int {
        guard let space = line.firstIndex(of: UInt8(ascii: " ")), line.count >= space + 4 else { return 0 }
        var code = 0
        for byte in line[(space + 1)...(space + 3)] {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return 0 }
            code = code * 10 + Int(byte - UInt8(ascii: "0"))
        }
        if line.count > space + 4 && line[space + 4] != UInt8(ascii: " ") { return 0 }
        return code
    }

    private static func trimmed(_ bytes: UnsafeRawBufferPointer) -> String {
        var start = 0, end = bytes.count
        while start < end, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
        while end > start, bytes[end - 1] == UInt8(ascii: " ") || bytes[end - 1] == UInt8(ascii: "\t") { end -= 1 }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }
}
