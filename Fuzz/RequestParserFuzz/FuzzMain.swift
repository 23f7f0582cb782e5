// libFuzzer entry point for the HTTP request parser, built by scripts/fuzz.sh together with
// the parser's sources (not part of the package build). Invariants checked on every input:
// no crash or sanitizer report; `consumed` never exceeds the bytes given; a complete request
// consumed something; refusals use the documented statuses; and feeding the bytes whole or
// cut into pieces (at offsets derived from the data, and before the last byte) gives the same requests and refuses the
// same input, with the default limits and with small ones (so the limit checks are reached).
// The refusal's status may differ when an input has two faults (say a bare CR in a request
// line that is also too long: whichever is seen first answers, 400 or 414); both close.

/// What a connection would see: each request (method, target, version, headers, body,
/// keep-alive) and the refusal status, if any.
func outcomes(_ pieces: [ArraySlice<UInt8>], limits: HTTPLimits) -> [String] {
    var parser = RequestParser(limits: limits)
    var buffer: [UInt8] = []
    var out: [String] = []
    for piece in pieces {
        buffer += piece
        parsing: while !buffer.isEmpty {
            switch parser.parse(buffer) {
            case let .complete(r, consumed):
                precondition(consumed > 0 && consumed <= buffer.count, "complete: consumed out of range")
                precondition(r.body.count <= limits.maxBodyBytes, "body beyond the limit")
                let headers = r.headers.map { "\($0.name):\($0.value)" }.joined(separator: "|")
                out.append("\(r.method) \(r.target) \(r.version.text) [\(headers)] \(r.body) \(r.keepAlive)")
                buffer.removeFirst(consumed)
            case let .continueRequested(consumed):
                precondition(consumed > 0 && consumed <= buffer.count, "continue: consumed out of range")
                out.append("100")
                buffer.removeFirst(consumed)
            case let .needMoreData(consumed):
                precondition(consumed <= buffer.count, "needMore: consumed out of range")
                buffer.removeFirst(consumed)
                break parsing
            case let .failed(error):
                precondition([400, 413, 414, 417, 431, 501, 505].contains(error.status.code), "unexpected status \(error.status.code)")
                out.append("refused")
                return out
            }
        }
    }
    return out
}

let smallLimits: HTTPLimits = {
    var l = HTTPLimits()
    l.maxRequestLineBytes = 64
    l.maxHeaderBytes = 160
    l.maxHeaderCount = 6
    l.maxBodyBytes = 96
    return l
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for limits in [HTTPLimits(), smallLimits] {
        let whole = outcomes([bytes[...]], limits: limits)
        guard size > 3 else { continue }
        // Cuts derived from the data (any offset is reachable), and the last byte on its own
        // (the final LF of a head or trailer section, where limit checks are most delicate).
        let a = (Int(bytes[0]) << 8 | Int(bytes[1])) % size, b = (Int(bytes[2]) << 8 | Int(bytes[1])) % size
        let (lo, hi) = (min(a, b), max(a, b))
        let splits: [[ArraySlice<UInt8>]] = [
            [bytes[..<a], bytes[a...]],
            [bytes[..<lo], bytes[lo..<hi], bytes[hi...]],
            [bytes[..<(size - 1)], bytes[(size - 1)...]],
        ]
        for pieces in splits {
            let split = outcomes(pieces, limits: limits)
            if split != whole {
                fatalError("split into \(pieces.map(\.count)) differs:\n\(split)\nwhole:\n\(whole)")
            }
        }
    }
    return 0
}
