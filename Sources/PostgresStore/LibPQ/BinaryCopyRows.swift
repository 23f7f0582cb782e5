import Foundation

/// Rows in PostgreSQL's binary `COPY` format, for `PostgresConnection.copyIn` and
/// `sendCopyData`: per row a field count and each field as a length and bytes (length -1
/// for NULL). The connection sends the format's header and trailer around them. Values go
/// in the column types' binary forms, so the server neither parses statement text nor
/// converts values: for batches of audit rows this costs PostgreSQL far less than a many-row
/// `INSERT` with parameters.
///
/// Each row must give exactly the fields, in order and of the types, that the `COPY`
/// statement's column list declares; the server refuses the whole batch otherwise.
public struct BinaryCopyRows: Sendable {
    /// "PGCOPY\n\377\r\n\0", flags (no OIDs), header extension length.
    static let header: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00] + [0, 0, 0, 0] + [0, 0, 0, 0]
    /// Microseconds from the Unix epoch to PostgreSQL's, 2000-01-01 00:00:00 UTC.
    private static let postgresEpochMicroseconds: Int64 = 946_684_800_000_000

    private(set) var bytes: [UInt8]

    public init(reservingCapacity capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Starts a row of `fields` fields.
    public mutating func beginRow(fields: Int) {
        appendBigEndian(UInt16(fields))
    }

    /// A `text` field (UTF-8). PostgreSQL refuses NUL in text; `PostgresConnection.copyIn`
    /// reports it as a server error for the whole batch.
    public mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            appendBigEndian(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// A `text` field, or NULL.
    public mutating func append(_ text: String?) {
        if let text { append(text) } else { appendNull() }
    }

    /// An `integer` (int4) field.
    public mutating func append(int32 value: Int32) {
        appendBigEndian(UInt32(4))
        appendBigEndian(UInt32(bitPattern: value))
    }

    /// A `bigint` (int8) field.
    public mutating func append(int64 value: Int64) {
        appendBigEndian(UInt32(8))
        appendBigEndian(UInt64(bitPattern: value))
    }

    /// A `boolean` field.
    public mutating func append(bool value: Bool) {
        appendBigEndian(UInt32(1))
        bytes.append(value ? 1 : 0)
    }

    /// A `timestamptz` field, to the microsecond (PostgreSQL's resolution).
    public mutating func append(timestamp date: Date) {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded()) - BinaryCopyRows.postgresEpochMicroseconds
        append(int64: micros)
    }

    /// A NULL field.
    public mutating func appendNull() {
        appendBigEndian(UInt32(bitPattern: -1))
    }

    /// What follows the last row: a field count of -1.
    static let trailer: [UInt8] = [0xFF, 0xFF]

    private mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }
}
