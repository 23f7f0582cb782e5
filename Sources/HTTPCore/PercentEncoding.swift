/// Percent-encoding (RFC 3986 §2.1) without Foundation's leniency.
public enum PercentEncoding {
    /// Decodes `%XX` escapes; nil when an escape is malformed or the result is not UTF-8.
    public static func decode<S: StringProtocol>(_ text: S) -> String? {
        decode(text, plusAsSpace: false)
    }

    /// Decodes an `application/x-www-form-urlencoded` component (`+` is a space).
    public static func decodeFormComponent<S: StringProtocol>(_ text: S) -> String? {
        decode(text, plusAsSpace: true)
    }

    static func decode<S: StringProtocol>(_ text: S, plusAsSpace: Bool) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        var it = text.utf8.makeIterator()
        while let c = it.next() {
            switch c {
            case UInt8(ascii: "%"):
                guard let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) else { return nil }
                out.append(hv << 4 | lv)
            case UInt8(ascii: "+") where plusAsSpace:
                out.append(UInt8(ascii: " "))
            default:
                out.append(c)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// Encodes everything but RFC 3986 unreserved characters.
    public static func encode(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for b in text.utf8 {
            if isUnreserved(b) {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%"
                out.unicodeScalars.append(Unicode.Scalar(hexDigits[Int(b >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(hexDigits[Int(b & 0xF)]))
            }
        }
        return out
    }

    /// `name=value&…` with every name and value percent-encoded.
    public static func formEncode(_ items: [(String, String)]) -> String {
        items.map { encode($0.0) + "=" + encode($0.1) }.joined(separator: "&")
    }

    static func isUnreserved(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39)
            || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)
}
