/// A set of bytes as two 64-bit masks plus a flag for 0x80...0xFF: trivially copyable, so
/// checking a byte costs a shift and a mask, with no array access or reference counting.
package struct ByteSet: Sendable {
    // Inlinable, so that the client's parser (another module) tests bytes without a call
    // per byte, and reads the set once per run of bytes rather than once per byte.
    @usableFromInline let low: UInt64
    @usableFromInline let high: UInt64
    @usableFromInline let upper: Bool

    init(_ predicate: (UInt8) -> Bool) {
        var low: UInt64 = 0, high: UInt64 = 0
        for b in 0..<64 where predicate(UInt8(b)) { low |= 1 << UInt64(b) }
        for b in 64..<128 where predicate(UInt8(b)) { high |= 1 << UInt64(b - 64) }
        self.low = low
        self.high = high
        self.upper = (128...255).allSatisfy { predicate(UInt8($0)) }
    }

    @inlinable @inline(__always)
    package func contains(_ b: UInt8) -> Bool {
        if b < 64 { return low & (1 << UInt64(b)) != 0 }
        if b < 128 { return high & (1 << UInt64(b - 64)) != 0 }
        return upper
    }

    /// Whether every byte of `bytes` is in the set. (Not generic: in the client's module, a
    /// generic form ran unspecialized, a witness-table call per byte.)
    @inlinable
    package func containsAll(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for b in bytes where !contains(b) { return false }
        return true
    }

    /// Whether every byte of `text` (UTF-8) is in the set.
    @inlinable
    package func containsAll(_ text: String) -> Bool {
        var text = text // withUTF8 is mutating; a native string is not copied
        return text.withUTF8 { containsAll($0) }
    }

    package subscript(_ b: Int) -> Bool { contains(UInt8(truncatingIfNeeded: b)) }
}

/// Character classes of RFC 9110 §5.6, for the server's parser and the client's alike.
package enum ByteClass {
    /// tchar: `!#$%&'*+-.^_`|~`, digits and letters.
    package static let token = ByteSet { b in
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return Array("!#$%&'*+-.^_`|~".utf8).contains(b)
        }
    }

    /// field-vchar, SP and HTAB: what a field value may hold (obs-text included).
    package static let fieldValue = ByteSet { b in b == 0x09 || b == 0x20 || (b >= 0x21 && b != 0x7F) }

    /// Visible ASCII: what a request-target may hold.
    package static let target = ByteSet { b in b >= 0x21 && b <= 0x7E }

    /// What a Host value may hold: reg-name, IP literals and a port.
    package static let host = ByteSet { b in
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return Array("-._~!$&'()*+,;=:[]%".utf8).contains(b)
        }
    }

    /// What a caller-supplied request id may hold.
    package static let requestID = ByteSet { b in
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: ".")
        }
    }
}
