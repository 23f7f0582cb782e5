internal import CLibPQ
import Foundation

/// One libpq connection. It owns its `PGconn*` (PQfinish in deinit, also after a failed
/// connect) and is used by one thread at a time: the pool runs every call on the
/// connection's own serial queue, never on the Swift concurrency pool.
public final class PostgresConnection: @unchecked Sendable {
    // @unchecked: `conn` and `prepared` are touched only on `queue`.
    private let conn: OpaquePointer
    private var prepared: [String: String] = [:]
    /// The serial queue all of this connection's blocking calls run on.
    public let queue: DispatchQueue

    /// Connects with `PQconnectdbParams`; `url` is expanded as the `dbname` keyword, so it
    /// may be a URI or a key=value string, and nothing is built by string interpolation.
    public init(url: String, connectTimeoutSeconds: Int = 5) throws(PostgresError) {
        let keywords = ["connect_timeout", "application_name", "dbname"]
        let values = [String(connectTimeoutSeconds), "smart-bff", url]
        let connection: OpaquePointer? = PostgresConnection.withCStrings(keywords) { k in
            PostgresConnection.withCStrings(values) { v in PQconnectdbParams(k, v, 1) }
        }
        guard let connection else { throw PostgresError(.connection, "out of memory connecting to PostgreSQL") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = PostgresError.redact(String(cString: PQerrorMessage(connection)).trimmingCharacters(in: .whitespacesAndNewlines))
            PQfinish(connection)
            throw PostgresError(.connection, "cannot connect to PostgreSQL: \(message)")
        }
        conn = connection
        queue = DispatchQueue(label: "smart-bff.postgres")
    }

    deinit { PQfinish(conn) }

    /// Whether the connection is still usable.
    public var isHealthy: Bool { PQstatus(conn) == CONNECTION_OK }

    /// Runs `query` (blocking; call on `queue`). Statements are prepared once per
    /// connection and executed with their parameters in text format.
    public func execute(_ query: Query) throws(PostgresError) -> [PostgresRow] {
        let name = try prepare(query.sql, count: query.binds.count)
        let texts = query.binds.map(\.text)
        let result: OpaquePointer? = PostgresConnection.withOptionalCStrings(texts) { values in
            PQexecPrepared(conn, name, Int32(texts.count), values, nil, nil, 0)
        }
        return try rows(of: result)
    }

    /// Runs SQL text without parameters (migrations, BEGIN/COMMIT); may hold several statements.
    public func executeScript(_ sql: String) throws(PostgresError) {
        _ = try rows(of: PQexec(conn, sql))
    }

    private func prepare(_ sql: String, count: Int) throws(PostgresError) -> String {
        if let name = prepared[sql] { return name }
        let name = "s\(prepared.count)"
        _ = try rows(of: PQprepare(conn, name, sql, Int32(count), nil))
        prepared[sql] = name
        return name
    }

    /// Copies the rows out of a result and clears it, on every path.
    private func rows(of result: OpaquePointer?) throws(PostgresError) -> [PostgresRow] {
        guard let result else {
            throw PostgresError(isHealthy ? .query : .connection, PostgresError.redact(String(cString: PQerrorMessage(conn))))
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return []
        case PGRES_TUPLES_OK:
            let rowCount = Int(PQntuples(result)), columns = Int(PQnfields(result))
            var rows: [PostgresRow] = []
            rows.reserveCapacity(rowCount)
            for r in 0..<rowCount {
                var values: [String?] = []
                values.reserveCapacity(columns)
                for c in 0..<columns {
                    values.append(PQgetisnull(result, Int32(r), Int32(c)) == 1 ? nil : String(cString: PQgetvalue(result, Int32(r), Int32(c))))
                }
                rows.append(PostgresRow(values: values))
            }
            return rows
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) } ?? "query failed"
            if !isHealthy { throw PostgresError(.connection, sqlState: state, "connection lost") }
            throw PostgresError(.query, sqlState: state, PostgresError.redact(primary))
        }
    }

    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        withOptionalCStrings(strings.map { Optional($0) }, body)
    }

    /// Makes a NULL-terminated array of C strings that lives for the duration of `body`.
    private static func withOptionalCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let pointers: [UnsafeMutablePointer<CChar>?] = strings.map { $0.map { strdup($0) } }
        defer { for p in pointers { free(p) } }
        let array = pointers.map { UnsafePointer($0) } + [nil]
        return array.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
