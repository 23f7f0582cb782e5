import BFFTesting
import Foundation
@testable import PostgresStore
import Testing

@Suite("binary COPY: rows go in whole and exact, or not at all")
struct BinaryCopyTests {
    static let copy = "COPY c (at, label, note, small, big) FROM STDIN (FORMAT binary)"

    func pool() async throws -> ConnectionPool {
        let pool = ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad())
        try await pool.query("CREATE TABLE c (id serial, at timestamptz, label text NOT NULL, note text, small integer, big bigint)")
        return pool
    }

    func copy(_ rows: BinaryCopyRows, into pool: ConnectionPool, statement: String = BinaryCopyTests.copy) async throws {
        try await pool.withConnection { connection in
            try await connection.run { try $0.copyIn(statement, rows: rows) }
        }
    }

    @Test("booleans come back as sent")
    func booleans() async throws {
        let pool = try await pool()
        defer { pool.close() }
        try await pool.query("ALTER TABLE c ADD COLUMN flag boolean")
        var rows = BinaryCopyRows()
        for flag in [true, false, true] {
            rows.beginRow(fields: 2)
            rows.append("x")
            rows.append(bool: flag)
        }
        try await copy(rows, into: pool, statement: "COPY c (label, flag) FROM STDIN (FORMAT binary)")
        #expect(try await pool.query("SELECT flag FROM c ORDER BY id").map { try $0.bool(0) } == [true, false, true])
    }

    @Test("every field type comes back as sent: text of any bytes but NUL, NULL, integer and timestamp limits")
    func roundTrip() async throws {
        let pool = try await pool()
        defer { pool.close() }
        let labels = ["tab\there", "line\nbreak\r\n", "back\\slash \\N", "ünïcødé ✓ 🩺", "", "'; DROP TABLE c; --", String(repeating: "x", count: 70_000)]
        let dates = [Date(timeIntervalSince1970: 1_700_000_000.123456), Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 946_684_799.999999)]
        var rows = BinaryCopyRows()
        for (i, label) in labels.enumerated() {
            rows.beginRow(fields: 5)
            rows.append(timestamp: dates[i % dates.count])
            rows.append(label)
            rows.append(i % 2 == 0 ? nil : "note \(i)")
            rows.append(int32: i == 0 ? .min : (i == 1 ? .max : Int32(i)))
            rows.append(int64: i == 0 ? .min : (i == 1 ? .max : -Int64(i)))
        }
        try await copy(rows, into: pool)
        let stored = try await pool.query("""
            SELECT extract(epoch FROM at)::numeric::text, label, note, small, big FROM c ORDER BY id
            """)
        #expect(stored.count == labels.count)
        for (i, row) in stored.enumerated() {
            let expected = dates[i % dates.count].timeIntervalSince1970
            #expect(abs(Double(try row.string(0))! - expected) < 0.000_001, "row \(i)")
            #expect(try row.string(1) == labels[i])
            #expect(row.optionalString(2) == (i % 2 == 0 ? nil : "note \(i)"))
            #expect(try row.decode(Int64.self, at: 3) == (i == 0 ? Int64(Int32.min) : (i == 1 ? Int64(Int32.max) : Int64(i))))
            #expect(try row.decode(Int64.self, at: 4) == (i == 0 ? .min : (i == 1 ? .max : -Int64(i))))
        }
    }

    @Test("a malformed row fails the whole batch with a server error; the connection stays usable")
    func malformedRowRefused() async throws {
        var configuration = ConnectionPool.Configuration()
        configuration.size = 1 // the next statement runs on the same connection
        let pool = ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad(), configuration: configuration)
        defer { pool.close() }
        try await pool.query("CREATE TABLE c (id serial, at timestamptz, label text NOT NULL, note text, small integer, big bigint)")
        var rows = BinaryCopyRows()
        rows.beginRow(fields: 5)
        rows.append(timestamp: Date())
        rows.append("fine")
        rows.appendNull()
        rows.append(int32: 1)
        rows.append(int64: 1)
        rows.beginRow(fields: 4) // one field short
        rows.append(timestamp: Date())
        rows.append("short")
        rows.appendNull()
        rows.append(int32: 2)
        await #expect { try await copy(rows, into: pool) } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.sqlState != nil && !error.isConnectionFailure // the server's refusal, not a broken link
        }
        #expect(try await pool.query("SELECT count(*) FROM c")[0].int(0) == 0)
        #expect(try await pool.query("SELECT 1")[0].int(0) == 1)
    }

    @Test("text with a NUL character, or NULL for a NOT NULL column, stores nothing")
    func invalidValuesRefused() async throws {
        let pool = try await pool()
        defer { pool.close() }
        for label in ["before\u{0}after", nil] as [String?] {
            var rows = BinaryCopyRows()
            rows.beginRow(fields: 5)
            rows.append(timestamp: Date())
            rows.append(label)
            rows.appendNull()
            rows.append(int32: 1)
            rows.append(int64: 1)
            await #expect(throws: PostgresError.self) { try await copy(rows, into: pool) }
        }
        #expect(try await pool.query("SELECT count(*) FROM c")[0].int(0) == 0)
    }

    @Test("a statement that is not COPY FROM STDIN is refused")
    func notACopy() async throws {
        let pool = try await pool()
        defer { pool.close() }
        await #expect(throws: PostgresError.self) { try await copy(BinaryCopyRows(), into: pool, statement: "SELECT 1") }
        await #expect(throws: PostgresError.self) { try await copy(BinaryCopyRows(), into: pool, statement: "COPY missing FROM STDIN (FORMAT binary)") }
        #expect(try await pool.query("SELECT 1")[0].int(0) == 1)
    }
}
