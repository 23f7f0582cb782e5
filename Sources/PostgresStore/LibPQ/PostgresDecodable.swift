import Foundation

/// A type that can be read from PostgreSQL's text output format.
public protocol PostgresDecodable: Sendable {
    /// Parses `text`, the server's text output for column `column`.
    static func decode(postgresText text: String, column: Int) throws(PostgresError) -> Self
}

extension String: PostgresDecodable {
    public static func decode(postgresText text: String, column: Int) throws(PostgresError) -> String { text }
}

extension Int: PostgresDecodable {
    public static func decode(postgresText text: String, column: Int) throws(PostgresError) -> Int {
        guard let value = Int(text) else { throw .decoding(column: column, expected: "an integer") }
        return value
    }
}

extension Int64: PostgresDecodable {
    public static func decode(postgresText text: String, column: Int) throws(PostgresError) -> Int64 {
        guard let value = Int64(text) else { throw .decoding(column: column, expected: "a 64-bit integer") }
        return value
    }
}

extension Double: PostgresDecodable {
    public static func decode(postgresText text: String, column: Int) throws(PostgresError) -> Double {
        guard let value = Double(text) else { throw .decoding(column: column, expected: "a number") }
        return value
    }
}

extension Bool: PostgresDecodable {
    public static func decode(postgresText text: String, column: Int) throws(PostgresError) -> Bool {
        switch text {
        case "t": return true
        case "f": return false
        default: throw .decoding(column: column, expected: "a boolean")
        }
    }
}

extension Array: PostgresDecodable where Element == UInt8 {
    /// `bytea` in hex output format (`\x0a1b…`), the server default since 9.0.
    public static func decode(postgresText text: String, column: Int) throws(PostgresError) -> [UInt8] {
        let utf8 = text.utf8
        guard utf8.count >= 2, utf8.count % 2 == 0, text.hasPrefix("\\x") else { throw .decoding(column: column, expected: "bytea") }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2 - 1)
        var iterator = utf8.dropFirst(2).makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            guard let h = hexValue(high), let l = hexValue(low) else { throw .decoding(column: column, expected: "bytea") }
            out.append(h << 4 | l)
        }
        return out
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

extension Date: PostgresDecodable {
    /// A `timestamptz` in ISO output (`2024-05-06 07:08:09.123456+02`, `…-03:30`), or a
    /// plain number of seconds since 1970 (`extract(epoch from …)`).
    public static func decode(postgresText text: String, column: Int) throws(PostgresError) -> Date {
        if let seconds = Double(text) { return Date(timeIntervalSince1970: seconds) }
        guard let seconds = TimestampText.secondsSince1970(text) else {
            throw .decoding(column: column, expected: "an ISO timestamptz")
        }
        return Date(timeIntervalSince1970: seconds)
    }
}
