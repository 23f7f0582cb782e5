import BFFTesting
import Foundation
@testable import PostgresStore
import Testing

@Suite("libpq layer: binds, decoding, errors")
struct LibPQTests {
    func pool() async throws -> ConnectionPool {
        ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad())
    }

    @Test("interpolated values become $n binds and never SQL text")
    func interpolationBinds() {
        let evil = "'; DROP TABLE sessions; --"
        let query: Query = "SELECT \(evil), \(42), \(Optional<String>.none), \(raw: "now()")"
        #expect(query.sql == "SELECT $1, $2, $3, now()")
        #expect(query.binds == [.text(evil), .int(42), .null])
    }

    @Test("values round-trip verbatim, injection strings included", arguments: [
        "'; DROP TABLE t; --", "\" OR 1=1 --", "$1", "\\x00", "Robert'); DELETE FROM t;--", "ünïcødé ✓", "",
    ])
    func textRoundTrip(_ value: String) async throws {
        let pool = try await pool()
        defer { pool.close() }
        try await pool.query("CREATE TABLE t (v text)")
        try await pool.query("INSERT INTO t VALUES (\(value))")
        #expect(try await pool.query("SELECT v FROM t")[0].string(0) == value)
        #expect(try await pool.query("SELECT count(*) FROM pg_tables WHERE tablename = 't'")[0].int(0) == 1)
    }

    @Test("text with a NUL character is refused, not cut short")
    func nulRefused() async throws {
        let pool = try await pool()
        defer { pool.close() }
        await #expect { try await pool.query("SELECT \("before\u{0}after")") } throws: { error in
            (error as? PostgresError)?.message.contains("$1") == true
        }
        #expect(try await pool.query("SELECT 1").count == 1)
    }

    @Test("typed decoding: bytea (all 256 byte values, sent binary), Int64, Bool, Double, Date, NULL")
    func typedDecoding() async throws {
        let pool = try await pool()
        defer { pool.close() }
        let bytes = (0...255).map(UInt8.init) + [0, 0]
        let row = try await pool.query("""
            SELECT \(bytes)::bytea, \(Int64.max)::bigint, \(true), \(0.25)::float8,
                   timestamptz '2024-02-29 23:59:58.25+00', NULL::text, ''::bytea
            """)[0]
        #expect(try row.decode([UInt8].self, at: 0) == bytes)
        #expect(try row.decode(Int64.self, at: 1) == Int64.max)
        #expect(try row.decode(Bool.self, at: 2))
        #expect(try row.decode(Double.self, at: 3) == 0.25)
        #expect(try row.decode(Date.self, at: 4) == Date(timeIntervalSince1970: 1_709_251_198.25))
        #expect(try row.decode(String?.self, at: 5) == nil)
        #expect(try row.decode([UInt8].self, at: 6) == [])
        #expect(throws: PostgresError.self) { try row.decode(String.self, at: 5) }
        #expect(throws: PostgresError.self) { try row.decode(Int.self, at: 2) }
    }

    @Test("the embedded cluster (trust authentication) is reachable by its owner alone: folder and socket 0700, no TCP")
    func embeddedClusterPrivate() async throws {
        let cluster = try await PostgresCluster.shared()
        let folder = URL(fileURLWithPath: cluster.socketDirectory).deletingLastPathComponent().path
        for path in [folder, cluster.socketDirectory] {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
            #expect(mode & 0o077 == 0, "\(path): \(String(mode, radix: 8))")
        }
        let admin = cluster.poolForLoad()
        defer { admin.close() }
        #expect(try await admin.query("SHOW unix_socket_permissions")[0].string(0) == "0700")
        #expect(try await admin.query("SHOW listen_addresses")[0].string(0) == "")
    }

    @Test("a database whose defaults are bytea_output = escape and DateStyle = German still decodes bytea and timestamps")
    func serverDefaultsPinned() async throws {
        let cluster = try await PostgresCluster.shared()
        let name = "t_" + String(UUID().uuidString.prefix(8)).lowercased().filter { $0.isLetter || $0.isNumber }
        _ = try await cluster.createDatabase(name: name)
        let admin = cluster.poolForLoad()
        defer { admin.close() }
        // The name was made above from letters and digits.
        try await admin.query("ALTER DATABASE \(raw: name) SET bytea_output = 'escape'")
        try await admin.query("ALTER DATABASE \(raw: name) SET DateStyle = 'German, DMY'")
        let pool = cluster.poolForLoad(database: name)
        defer { pool.close() }
        let bytes: [UInt8] = [0, 1, 0x5C, 0x27, 0x7F, 0x80, 0xFF]
        let row = try await pool.query("SELECT \(bytes)::bytea, timestamptz '2024-02-29 23:59:58.25+00'")[0]
        #expect(try row.decode([UInt8].self, at: 0) == bytes)
        #expect(try row.decode(Date.self, at: 1) == Date(timeIntervalSince1970: 1_709_251_198.25))
    }

    @Test("text goes to a LATIN1 database as characters, not as UTF-8 bytes read as LATIN1; what LATIN1 lacks is refused")
    func clientEncodingPinned() async throws {
        let cluster = try await PostgresCluster.shared()
        let name = "t_" + String(UUID().uuidString.prefix(8)).lowercased().filter { $0.isLetter || $0.isNumber }
        let admin = cluster.poolForLoad()
        defer { admin.close() }
        // The name was made above from letters and digits.
        try await admin.query("CREATE DATABASE \(raw: name) ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
        let pool = cluster.poolForLoad(database: name)
        defer { pool.close() }
        let row = try await pool.query("SELECT length(\("é")::text), \("é")::text")[0]
        #expect(try row.decode(Int.self, at: 0) == 1, "one character, not the two of its UTF-8 bytes")
        #expect(try row.decode(String.self, at: 1) == "é")
        await #expect(throws: PostgresError.self) { try await pool.query("SELECT \("€")::text") }
    }

    @Test("timestamptz decodes to the same instant whatever the session time zone")
    func timeZones() async throws {
        let pool = try await pool()
        defer { pool.close() }
        let instant = Date(timeIntervalSince1970: 1_700_000_000.5)
        for zone in ["UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham"] {
            let date = try await pool.withConnection { c in
                try await c.run { connection in
                    // The zone names are literals of this test, not input.
                    try connection.executeScript("SET TimeZone TO '\(zone)'")
                    defer { try? connection.executeScript("RESET TimeZone") }
                    return try connection.execute("SELECT to_timestamp(\(instant))")[0].date(0)
                }
            }
            #expect(date == instant, "in \(zone)")
        }
    }

    @Test("timestamp text parser", arguments: [
        ("1970-01-01 00:00:00+00", 0.0), ("2024-05-06 07:08:09.5+02", 1_714_972_089.5),
        ("2000-01-01 00:00:00-03:30", 946_697_400.0), ("1900-03-01 00:00:00+00:19:32", -2_203_892_372.0),
    ])
    func timestampText(_ text: String, _ seconds: Double) {
        #expect(TimestampText.secondsSince1970(text) == seconds)
    }

    @Test("malformed timestamps are refused", arguments: ["infinity", "2024-13-01 00:00:00+00", "2024-01-01 00:00:00", "2024-01-01T00:00:00Z", "0044-03-15 00:00:00+00 BC"])
    func badTimestamps(_ text: String) {
        #expect(TimestampText.secondsSince1970(text) == nil)
    }

    @Test("errors carry the SQLSTATE and never the bound values, not even in debugDescription")
    func errorsRedacted() async throws {
        let pool = try await pool()
        defer { pool.close() }
        try await pool.query("CREATE TABLE u (k text PRIMARY KEY)")
        try await pool.query("INSERT INTO u VALUES (\("SECRET-KEY-7"))")
        for query: Query in ["SELECT \("SECRET-VALUE-42")::integer", "INSERT INTO u VALUES (\("SECRET-KEY-7"))"] {
            do {
                try await pool.query(query.named("probe"))
                Issue.record("expected an error")
            } catch let error as PostgresError {
                #expect(error.sqlState == "22P02" || error.isUniqueViolation)
                for text in [error.description, error.debugDescription, "\(error)", error.message] {
                    #expect(!text.contains("SECRET"))
                }
                #expect(error.debugDescription.contains("probe"))
            }
        }
    }

    @Test("statements built per call do not pile up as prepared statements")
    func preparedStatementLimit() async throws {
        var configuration = ConnectionPool.Configuration()
        configuration.size = 1
        let pool = ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad(), configuration: configuration)
        defer { pool.close() }
        for i in 0..<(PostgresConnection.preparedStatementLimit + 30) {
            #expect(try await pool.query("SELECT \(i)::int AS \(raw: "c\(i)")")[0].int(0) == i)
        }
        let prepared = try await pool.query("SELECT count(*) FROM pg_prepared_statements")[0].int(0)
        #expect(prepared <= PostgresConnection.preparedStatementLimit)
        #expect(prepared >= PostgresConnection.preparedStatementLimit - 1)
    }

    @Test("server notices do not reach stderr and do not fail statements")
    func notices() async throws {
        let pool = try await pool()
        defer { pool.close() }
        try await pool.query("CREATE TABLE IF NOT EXISTS n (x int)")
        try await pool.query("CREATE TABLE IF NOT EXISTS n (x int)")
        #expect(try await pool.query("SELECT count(*) FROM n")[0].int(0) == 0)
    }
}
