// libFuzzer entry point for the HTTP request parser. Built by scripts/fuzz.sh together
// with the parser's sources; not part of the package build.

/// Parses `bytes` fed in the given pieces; returns the outcome sequence as text.
func outcomes(_ pieces: [[UInt8]]) -> [String] {
    var parser = RequestParser()
    var buffer: [UInt8] = []
    var out: [String] = []
    for piece in pieces {
        buffer += piece
        loop: while !buffer.isEmpty {
            switch parser.parse(buffer) {
            case let .complete(r, consumed):
                precondition(consumed > 0 && consumed <= buffer.count, "consumed out of range")
                out.append("\(r.method) \(r.target) \(r.headers.count) \(r.body.count) \(r.keepAlive)")
                buffer.removeFirst(consumed)
            case let .continueRequested(consumed):
                precondition(consumed <= buffer.count)
                buffer.removeFirst(consumed)
            case let .needMoreData(consumed):
                precondition(consumed <= buffer.count)
                buffer.removeFirst(consumed)
                break loop
            case let .failed(error):
                precondition([400, 408, 413, 414, 417, 431, 501, 505].contains(error.status.code), "unexpected status")
                out.append("error")
                return out
            }
        }
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let whole = outcomes([bytes])
    if size > 1 {
        let split = Int(bytes[0]) % size
        let pieces = [Array(bytes[..<split]), Array(bytes[split...])]
        precondition(outcomes(pieces) == whole, "split parsing differs from whole parsing")
    }
    return 0
}
