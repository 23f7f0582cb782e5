import Foundation

/// A value bound to a query parameter. It travels apart from the SQL text (text format,
/// `bytea` in binary), so it can never become SQL.
public enum PostgresValue: Sendable, Equatable {
    case text(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
    case bytes([UInt8])
    case null

    /// A timestamp, bound as seconds since 1970 (write `to_timestamp($n)` in SQL).
    public static func date(_ date: Date) -> PostgresValue { .double(date.timeIntervalSince1970) }

    enum Wire {
        case null
        case text(String)
        case binary([UInt8])
    }

    /// How the value goes over the wire.
    var wire: Wire {
        switch self {
        case let .text(s): return .text(s)
        case let .int(i): return .text(String(i))
        case let .double(d): return .text(String(d))
        case let .bool(b): return .text(b ? "t" : "f")
        case let .bytes(b): return .binary(b)
        case .null: return .null
        }
    }

    /// The parameter's type OID for `PQprepare`: `bytea` (17) for bytes, so the binary value is
    /// read as bytes whatever the context; 0 (let the server infer) otherwise.
    var typeOID: UInt32 {
        if case .bytes = self { return 17 }
        return 0
    }
}

extension Optional where Wrapped == String {
    /// `.text` or `.null`.
    public var postgresValue: PostgresValue { map { .text($0) } ?? .null }
}
