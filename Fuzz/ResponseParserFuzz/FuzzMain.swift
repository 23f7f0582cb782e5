// libFuzzer entry point for the outbound client's response parser (HTTPClient's
// ResponseParser: what an upstream, possibly hostile, sends back), built by
// scripts/fuzz.sh together with the parser's sources (not part of the package build).
// The first byte picks the request method (GET or HEAD); the rest is the response.
// Invariants checked on every input: no crash or sanitizer report; `feed` never uses more
// than it is given, and less only once the response is complete; a complete response with
// a declared Content-Length has exactly that many body bytes; and feeding the bytes whole
// or cut into pieces (at offsets derived from the data) gives the same head, body, end and
// reuse verdict, or the same refusal.
import HTTPCore

/// Everything a caller of the parser would notice.
func outcome(_ pieces: [ArraySlice<UInt8>], method: String) -> String {
    var parser = ResponseParser(requestMethod: method)
    var body: [UInt8] = []
    do {
        for piece in pieces {
            let used = try piece.withUnsafeBytes { bytes throws(HTTPClientError) in
                try parser.feed(bytes) { body += $0 }
            }
            precondition(used <= piece.count, "used more than given")
            precondition(used == piece.count || parser.isComplete, "stopped short of an incomplete response")
            if parser.isComplete { break }
        }
        try parser.finishAtEnd()
    } catch let error as HTTPClientError {
        return "refused: \(error.failure)"
    } catch {
        fatalError("an error that is not an HTTPClientError: \(error)")
    }
    let head = parser.head!
    if let length = parser.declaredLength, method != "HEAD", head.status != 204, head.status != 304 {
        precondition(body.count == length, "body of \(body.count) bytes for Content-Length \(length)")
    }
    let headers = head.headers.map { "\($0.name):\($0.value)" }.joined(separator: "|")
    return "\(head.status) [\(headers)] \(body) reuse=\(parser.allowsReuse)"
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 1 else { return 0 }
    let method = data[0] & 1 == 0 ? "GET" : "HEAD"
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let whole = outcome([bytes[...]], method: method)
    guard bytes.count > 3 else { return 0 }
    let n = bytes.count
    let a = (Int(bytes[0]) << 8 | Int(bytes[1])) % n, b = (Int(bytes[2]) << 8 | Int(bytes[1])) % n
    let (lo, hi) = (min(a, b), max(a, b))
    for pieces in [[bytes[..<a], bytes[a...]], [bytes[..<lo], bytes[lo..<hi], bytes[hi...]], [bytes[..<(n - 1)], bytes[(n - 1)...]]] {
        let split = outcome(pieces, method: method)
        // Bytes after a complete response are not part of it: where the cut falls may only
        // change what allowsReuse says about them (seen in the same piece, or not at all).
        if split != whole && split.replacingReuse() != whole.replacingReuse() {
            fatalError("split into \(pieces.map(\.count)) differs:\n\(split)\nwhole:\n\(whole)")
        }
    }
    return 0
}

extension String {
    func replacingReuse() -> String {
        guard let range = firstRange(of: " reuse=") else { return self }
        return String(self[..<range.lowerBound])
    }
}
