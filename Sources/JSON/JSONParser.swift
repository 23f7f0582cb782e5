/// Why a JSON text was refused.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    /// Byte offset where parsing stopped.
    public let offset: Int
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// A strict RFC 8259 parser: rejects duplicate object members (where `JSONSerialization` and
/// `JSONDecoder` silently disagree), lone surrogates, control characters in strings,
/// trailing data, and nesting deeper than `maxDepth`.
public struct JSONParser {
    public static func parse(_ text: String, maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }

    public static func parse(_ bytes: [UInt8], maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        var p = JSONParser(bytes: bytes, maxDepth: maxDepth)
        p.skipWhitespace()
        let v = try p.parseValue(depth: 0)
        p.skipWhitespace()
        guard p.i == bytes.count else { throw p.fail("trailing data") }
        return v
    }

    private let b: [UInt8]
    private var i = 0
    private let maxDepth: Int

    private init(bytes: [UInt8], maxDepth: Int) { self.b = bytes; self.maxDepth = maxDepth }

    private func fail(_ reason: String) -> JSONParseError { JSONParseError(reason: reason, offset: i) }

    private mutating func skipWhitespace() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
    }

    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= maxDepth else { throw fail("nesting too deep") }
        guard i < b.count else { throw fail("unexpected end") }
        switch b[i] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        default: return .number(try parseNumber())
        }
    }

    private mutating func expectLiteral(_ lit: StaticString) throws(JSONParseError) {
        let n = lit.utf8CodeUnitCount
        guard i + n <= b.count else { throw fail("bad literal") }
        let ok = lit.withUTF8Buffer { buf in (0..<n).allSatisfy { b[i + $0] == buf[$0] } }
        guard ok else { throw fail("bad literal") }
        i += n
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        i += 1
        var members: [(String, JSONValue)] = []
        var seen = Set<String>()
        skipWhitespace()
        if i < b.count, b[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard i < b.count, b[i] == UInt8(ascii: "\"") else { throw fail("expected member name") }
            let key = try parseString()
            guard seen.insert(key).inserted else { throw fail("duplicate member \"\(key)\"") }
            skipWhitespace()
            guard i < b.count, b[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            i += 1
            skipWhitespace()
            members.append((key, try parseValue(depth: depth + 1)))
            skipWhitespace()
            guard i < b.count else { throw fail("unexpected end") }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            throw fail("expected ',' or '}'")
        }
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        i += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if i < b.count, b[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
        while true {
            skipWhitespace()
            items.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            guard i < b.count else { throw fail("unexpected end") }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            throw fail("expected ',' or ']'")
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard i + 4 <= b.count else { throw fail("bad \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = b[i]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw fail("bad \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < b.count else { throw fail("unterminated string") }
            let c = b[i]
            if c == UInt8(ascii: "\"") { i += 1; break }
            if c < 0x20 { throw fail("control character in string") }
            if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
            i += 1
            guard i < b.count else { throw fail("unterminated escape") }
            let e = b[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard i + 2 <= b.count, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u") else { throw fail("lone surrogate") }
                    i += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("lone surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw fail("lone surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("bad scalar") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("bad escape")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8") }
        return s
    }

    private mutating func parseNumber() throws(JSONParseError) -> Double {
        let start = i
        if i < b.count, b[i] == UInt8(ascii: "-") { i += 1 }
        guard i < b.count, b[i] >= 0x30, b[i] <= 0x39 else { throw fail("unexpected character") }
        if b[i] == 0x30 { i += 1 } else { while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 } }
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            guard i < b.count, b[i] >= 0x30, b[i] <= 0x39 else { throw fail("bad fraction") }
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
        }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard i < b.count, b[i] >= 0x30, b[i] <= 0x39 else { throw fail("bad exponent") }
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
        }
        let text = String(decoding: b[start..<i], as: UTF8.self)
        guard let d = Double(text), d.isFinite else { throw fail("number out of range") }
        return d
    }
}
