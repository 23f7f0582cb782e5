/// Request ids: a caller's `X-Request-ID` when it is short and plain, otherwise a random one.
enum RequestID {
    static func make(from incoming: String?) -> String {
        if let incoming, (1...64).contains(incoming.utf8.count),
           incoming.utf8.allSatisfy({ ByteClass.requestID[Int($0)] }) {
            return incoming
        }
        var rng = SystemRandomNumberGenerator()
        let value = rng.next() as UInt64
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

extension ByteClass {
    static let requestID: [Bool] = (0..<256).map { b in
        switch UInt8(b) {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."): return true
        default: return false
        }
    }
}
