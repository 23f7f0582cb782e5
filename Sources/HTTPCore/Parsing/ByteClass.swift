/// Character classes of RFC 9110 §5.6, as lookup tables.
enum ByteClass {
    /// tchar: `!#$%&'*+-.^_`|~`, digits and letters.
    static let token: [Bool] = (0..<256).map { b in
        switch UInt8(b) {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default: return false
        }
    }

    /// field-vchar, SP and HTAB: what a field value may hold (obs-text included).
    static let fieldValue: [Bool] = (0..<256).map { b in b == 0x09 || b == 0x20 || (b >= 0x21 && b != 0x7F) }

    /// Visible ASCII: what a request-target may hold.
    static let target: [Bool] = (0..<256).map { b in b >= 0x21 && b <= 0x7E }

    /// What a Host value may hold: reg-name, IP literals and a port.
    static let host: [Bool] = (0..<256).map { b in
        switch UInt8(b) {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"),
             UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="),
             UInt8(ascii: ":"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "%"):
            return true
        default: return false
        }
    }
}
