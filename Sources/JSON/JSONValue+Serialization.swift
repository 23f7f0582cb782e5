extension JSONValue {
    /// Compact JSON text. Integral numbers print without a fraction; `/` is not escaped.
    public func serialized() -> String {
        var out = ""
        write(to: &out)
        return out
    }

    /// The compact JSON text as UTF-8 bytes.
    public var bytes: [UInt8] { Array(serialized().utf8) }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .number(n):
            if n.rounded() == n, abs(n) < 1e15 { out += String(Int64(n)) } else { out += "\(n)" }
        case let .string(s): JSONValue.writeString(s, to: &out)
        case let .array(items):
            out += "["
            for (k, v) in items.enumerated() {
                if k > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case let .object(members):
            out += "{"
            for (k, (key, v)) in members.enumerated() {
                if k > 0 { out += "," }
                JSONValue.writeString(key, to: &out)
                out += ":"
                v.write(to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "<": out += "\\u003c" // safe to embed in HTML
            default:
                if u.value < 0x20 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        out += "\""
    }
}
