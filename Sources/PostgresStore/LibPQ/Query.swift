import Foundation

/// SQL text with `$n` placeholders and their values, like postgres-nio's `PostgresQuery`.
/// String interpolation binds: `"SELECT … WHERE id = \(id)"` becomes `WHERE id = $1` with
/// `id` bound, so a value never enters the SQL text. `\(raw:)` is for SQL written by us
/// (column lists, keywords), never for input.
public struct Query: Sendable, ExpressibleByStringInterpolation {
    public private(set) var sql: String
    public private(set) var binds: [PostgresValue]
    /// A short name for error context (never a value).
    public var name: String?

    public init(_ sql: String, _ binds: [PostgresValue] = [], name: String? = nil) {
        self.sql = sql
        self.binds = binds
        self.name = name
    }

    public init(stringLiteral value: String) { self.init(value) }

    public init(stringInterpolation: Interpolation) {
        sql = stringInterpolation.sql
        binds = stringInterpolation.binds
    }

    /// The same query with an error-context name.
    public func named(_ name: String) -> Query {
        var copy = self
        copy.name = name
        return copy
    }

    public struct Interpolation: StringInterpolationProtocol {
        var sql = ""
        var binds: [PostgresValue] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + 4 * interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) { sql += literal }

        /// Binds `value` as the next parameter and writes its placeholder.
        public mutating func appendInterpolation(_ value: PostgresValue) {
            binds.append(value)
            sql += "$\(binds.count)"
        }

        public mutating func appendInterpolation(_ value: String) { appendInterpolation(.text(value)) }
        public mutating func appendInterpolation(_ value: String?) { appendInterpolation(value.postgresValue) }
        public mutating func appendInterpolation(_ value: Int) { appendInterpolation(.int(value)) }
        public mutating func appendInterpolation(_ value: Int64) { appendInterpolation(.int(Int(value))) }
        public mutating func appendInterpolation(_ value: Double) { appendInterpolation(.double(value)) }
        public mutating func appendInterpolation(_ value: Bool) { appendInterpolation(.bool(value)) }
        public mutating func appendInterpolation(_ value: [UInt8]) { appendInterpolation(.bytes(value)) }
        public mutating func appendInterpolation(_ value: [UInt8]?) { appendInterpolation(value.map { .bytes($0) } ?? .null) }
        /// A timestamp as seconds since 1970: write `to_timestamp(\(date))`.
        public mutating func appendInterpolation(_ value: Date) { appendInterpolation(.date(value)) }
        /// Trusted SQL text written by us, never input.
        public mutating func appendInterpolation(raw sql: String) { self.sql += sql }
    }
}
