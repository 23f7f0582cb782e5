import Foundation

/// A value bound to a query parameter. Sent in text format; never spliced into SQL.
public enum PostgresValue: Sendable, Equatable {
    case text(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
    case bytes([UInt8])
    case null

    /// A timestamp, bound as seconds since 1970 (use `to_timestamp($n)` in SQL).
    public static func date(_ date: Date) -> PostgresValue { .double(date.timeIntervalSince1970) }

    /// The text form PostgreSQL parses (bytea in hex format).
    var text: String? {
        switch self {
        case let .text(s): return s
        case let .int(i): return String(i)
        case let .double(d): return String(d)
        case let .bool(b): return b ? "t" : "f"
        case let .bytes(b): return "\\x" + b.map { String(format: "%02x", $0) }.joined()
        case .null: return nil
        }
    }
}

extension Optional where Wrapped == String {
    /// `.text` or `.null`.
    public var postgresValue: PostgresValue { map { .text($0) } ?? .null }
}

/// SQL text with `$n` placeholders and their values. String interpolation binds values:
/// `"SELECT … WHERE id = \(id)"` becomes `WHERE id = $1` with `id` bound, so a value can
/// never become SQL.
public struct Query: Sendable, ExpressibleByStringInterpolation {
    public private(set) var sql: String
    public private(set) var binds: [PostgresValue]

    public init(_ sql: String, _ binds: [PostgresValue] = []) {
        self.sql = sql
        self.binds = binds
    }

    public init(stringLiteral value: String) { self.init(value) }

    public init(stringInterpolation: Interpolation) {
        sql = stringInterpolation.sql
        binds = stringInterpolation.binds
    }

    public struct Interpolation: StringInterpolationProtocol {
        var sql = ""
        var binds: [PostgresValue] = []

        public init(literalCapacity: Int, interpolationCount: Int) {}

        public mutating func appendLiteral(_ literal: String) { sql += literal }

        public mutating func appendInterpolation(_ value: PostgresValue) {
            binds.append(value)
            sql += "$\(binds.count)"
        }

        public mutating func appendInterpolation(_ value: String) { appendInterpolation(.text(value)) }
        public mutating func appendInterpolation(_ value: String?) { appendInterpolation(value.postgresValue) }
        public mutating func appendInterpolation(_ value: Int) { appendInterpolation(.int(value)) }
        public mutating func appendInterpolation(_ value: [UInt8]) { appendInterpolation(.bytes(value)) }
        public mutating func appendInterpolation(_ value: Date) { appendInterpolation(.date(value)) }
        /// Trusted SQL text (column lists, keywords) written by us, never user input.
        public mutating func appendInterpolation(raw sql: String) { self.sql += sql }
    }
}
