import Foundation

/// One result row, copied out of libpq (text format). Columns are read by index, either
/// with `decode(_:at:)` or with the shorthands below.
public struct PostgresRow: Sendable {
    let values: [String?]

    /// The raw text of column `index` (nil for NULL).
    public subscript(index: Int) -> String? { values[index] }

    /// The number of columns.
    public var count: Int { values.count }

    /// Column `index` as `T`; throws when it is NULL or not a `T`.
    public func decode<T: PostgresDecodable>(_ type: T.Type, at index: Int) throws(PostgresError) -> T {
        guard let text = values[index] else { throw .decoding(column: index, expected: "non-NULL \(T.self)") }
        return try T.decode(postgresText: text, column: index)
    }

    /// Column `index` as `T`, or nil when it is NULL.
    public func decode<T: PostgresDecodable>(_ type: T?.Type, at index: Int) throws(PostgresError) -> T? {
        guard let text = values[index] else { return nil }
        return try T.decode(postgresText: text, column: index)
    }

    public func string(_ i: Int) throws(PostgresError) -> String { try decode(String.self, at: i) }
    public func optionalString(_ i: Int) -> String? { values[i] }
    public func int(_ i: Int) throws(PostgresError) -> Int { try decode(Int.self, at: i) }
    public func double(_ i: Int) throws(PostgresError) -> Double { try decode(Double.self, at: i) }
    public func bool(_ i: Int) throws(PostgresError) -> Bool { try decode(Bool.self, at: i) }
    /// A `timestamptz` column, or a number of seconds since 1970 (`extract(epoch from …)`).
    public func date(_ i: Int) throws(PostgresError) -> Date { try decode(Date.self, at: i) }
    public func optionalDate(_ i: Int) throws(PostgresError) -> Date? { try decode(Date?.self, at: i) }
    /// A `bytea` column (hex output format).
    public func bytes(_ i: Int) throws(PostgresError) -> [UInt8] { try decode([UInt8].self, at: i) }
    public func optionalBytes(_ i: Int) throws(PostgresError) -> [UInt8]? { try decode([UInt8]?.self, at: i) }
}
