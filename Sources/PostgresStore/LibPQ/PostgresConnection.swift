internal import CLibPQ
import Foundation

/// One libpq connection. It owns its `PGconn*` (`PQfinish` in `deinit`, and straight away
/// after a failed connect) and is used by one thread at a time: the pool runs every call on
/// the connection's own serial `queue`, never on the Swift concurrency pool.
public final class PostgresConnection: @unchecked Sendable {
    // @unchecked: `conn` and `prepared` are touched only on `queue` (or before the
    // connection is shared, in `init`).
    private let conn: OpaquePointer
    private var prepared: [String: String] = [:]
    /// The serial queue all of this connection's blocking calls run on.
    public let queue: DispatchQueue
    /// At most this many statements are prepared per connection; others run unprepared, so
    /// statements whose text is built per call cannot grow the server's memory.
    static let preparedStatementLimit = 64

    /// Connects (blocking) with `PQconnectdbParams`. `url` is passed as the `dbname` keyword
    /// with `expand_dbname = 1`, so it may be a URI or a `key=value` string, and no connection
    /// string is ever built by interpolation. Settings in `url` override our defaults
    /// (`connect_timeout`, TCP keepalives, `application_name`). `settings`: `SET` statements
    /// run once connected, as the session's own defaults (see `ConnectionPool.Configuration`).
    public init(url: String, connectTimeoutSeconds: Int = 5, settings: String? = nil) throws(PostgresError) {
        let parameters: [(String, String)] = [
            ("connect_timeout", String(connectTimeoutSeconds)),
            ("application_name", "smart-bff"),
            // TCP only (ignored on Unix sockets): notice a vanished server instead of hanging.
            ("keepalives_idle", "30"), ("keepalives_interval", "10"), ("keepalives_count", "3"),
            ("tcp_user_timeout", "30000"),
            ("dbname", url),
            // After `dbname`, so that the URL cannot change it: text goes both ways as UTF-8
            // whatever the database's encoding (the server refuses what it cannot store).
            ("client_encoding", "UTF8"),
        ]
        let connection: OpaquePointer? = CStringArray.with(parameters.map(\.0)) { keywords in
            CStringArray.with(parameters.map(\.1)) { values in PQconnectdbParams(keywords, values, 1) }
        }
        guard let connection else { throw .connection("out of memory connecting to PostgreSQL") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = PostgresError.redact(String(cString: PQerrorMessage(connection)))
            PQfinish(connection)
            throw .connection("cannot connect to PostgreSQL: \(message)")
        }
        // Server notices (e.g. "relation already exists, skipping") would go to stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        conn = connection
        queue = DispatchQueue(label: "smart-bff.postgres")
        // Values are decoded from the server's text: timestamps from ISO, bytea from hex. A
        // role or database may default to others (`bytea_output = escape`, say).
        try executeScript("SET DateStyle TO ISO; SET bytea_output TO hex" + (settings.map { "; " + $0 } ?? ""))
    }

    deinit { PQfinish(conn) }

    /// Whether the connection is still open (no network round trip).
    public var isHealthy: Bool { PQstatus(conn) == CONNECTION_OK }

    /// Whether the connection can be lent out: open, outside any transaction, and nothing
    /// waiting on its socket. An idle connection receives bytes only when the server is ending
    /// it (the FATAL notice of a shutdown or restart, `pg_terminate_backend`,
    /// `idle_session_timeout`) or has closed it (EOF), so readable means finished. Never blocks
    /// (`poll` with a zero timeout).
    func isUsable() -> Bool {
        guard PQstatus(conn) == CONNECTION_OK, PQtransactionStatus(conn) == PQTRANS_IDLE else { return false }
        var descriptor = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    /// Runs `query` (blocking; call on `queue`). Hot statements are prepared once per
    /// connection. Parameters go in text format, except `bytea`, which goes in binary.
    public func execute(_ query: Query) throws(PostgresError) -> [PostgresRow] {
        for (index, bind) in query.binds.enumerated() {
            if case let .text(text) = bind.wire, text.utf8.contains(0) { throw .invalidParameter(index + 1) }
        }
        let statement = try preparedName(for: query)
        let types = query.binds.map(\.typeOID)
        let result: OpaquePointer? = ParameterBuffers.with(query.binds) { count, values, lengths, formats in
            if let statement {
                return PQexecPrepared(conn, statement, count, values, lengths, formats, 0)
            }
            return PQexecParams(conn, query.sql, count, types, values, lengths, formats, 0)
        }
        return try rows(of: result, context: query.name)
    }

    /// Runs SQL text without parameters (migrations, `BEGIN`/`COMMIT`); it may hold several
    /// statements. Never pass input here.
    public func executeScript(_ sql: String) throws(PostgresError) {
        _ = try rows(of: PQexec(conn, sql), context: nil)
    }

    /// Runs `statement`, a `COPY ... FROM STDIN (FORMAT binary)` (constant text, never
    /// input), with `rows` as its data (blocking; call on `queue`). Like any one statement
    /// outside a transaction, it stores all of the rows or none.
    public func copyIn(_ statement: String, rows data: BinaryCopyRows) throws(PostgresError) {
        try beginCopy(statement)
        try sendCopyData(data)
        try endCopy()
    }

    /// Starts `statement`, a `COPY ... FROM STDIN (FORMAT binary)` (constant text, never
    /// input), and sends the binary format's header. Rows follow with `sendCopyData`, as
    /// they come; `endCopy` ends the statement (blocking; call on `queue`). Meanwhile the
    /// connection does nothing else.
    public func beginCopy(_ statement: String) throws(PostgresError) {
        guard let started = PQexec(conn, statement) else {
            throw .connection("PostgreSQL connection failed: " + PostgresError.redact(String(cString: PQerrorMessage(conn))))
        }
        if PQresultStatus(started) != PGRES_COPY_IN {
            _ = try rows(of: started, context: "copy")
            throw .query(sqlState: nil, serverMessage: "not a COPY FROM STDIN statement", context: "copy")
        }
        PQclear(started)
        try sendCopyData(BinaryCopyRows.header)
    }

    /// Sends rows of the `COPY` under way and flushes them, so that the server works on
    /// them now rather than all at the end (blocking; call on `queue`). A value the server
    /// refuses is reported by `endCopy`.
    public func sendCopyData(_ data: BinaryCopyRows) throws(PostgresError) {
        try sendCopyData(data.bytes)
    }

    /// Ends the `COPY` under way and reads its outcome (blocking; call on `queue`): the
    /// first failure is thrown, after every result has been read.
    public func endCopy() throws(PostgresError) {
        let sent = send(BinaryCopyRows.trailer)
        let ended = PQputCopyEnd(conn, sent ? nil : "smart-bff could not send the rows") == 1
        var failure: PostgresError?
        while let result = PQgetResult(conn) {
            if PQresultStatus(result) == PGRES_COPY_IN { // the end did not get through: give the connection up
                PQclear(result)
                throw .connection("PostgreSQL connection failed: COPY did not end")
            }
            do throws(PostgresError) { _ = try rows(of: result, context: "copy") } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
        if !sent || !ended {
            throw .connection("PostgreSQL connection failed: " + PostgresError.redact(String(cString: PQerrorMessage(conn))))
        }
    }

    private func sendCopyData(_ data: [UInt8]) throws(PostgresError) {
        guard send(data), PQflush(conn) == 0 else {
            throw .connection("PostgreSQL connection failed: " + PostgresError.redact(String(cString: PQerrorMessage(conn))))
        }
    }

    /// Sends COPY data in pieces of at most 1 MiB; false if libpq could not.
    private func send(_ data: [UInt8]) -> Bool {
        data.withUnsafeBytes { all in
            var offset = 0
            while offset < all.count {
                let piece = min(all.count - offset, 1 << 20)
                let start = all.baseAddress!.advanced(by: offset).assumingMemoryBound(to: CChar.self)
                guard PQputCopyData(conn, start, Int32(piece)) == 1 else { return false }
                offset += piece
            }
            return true
        }
    }

    private func preparedName(for query: Query) throws(PostgresError) -> String? {
        if let name = prepared[query.sql] { return name }
        guard prepared.count < PostgresConnection.preparedStatementLimit else { return nil }
        let name = "bff_\(prepared.count)"
        let types = query.binds.map(\.typeOID)
        _ = try rows(of: PQprepare(conn, name, query.sql, Int32(types.count), types), context: query.name)
        prepared[query.sql] = name
        return name
    }

    /// Turns a libpq result into rows or a typed error; the result is cleared on every path.
    private func rows(of result: OpaquePointer?, context: String?) throws(PostgresError) -> [PostgresRow] {
        guard let result else {
            throw .connection("PostgreSQL connection failed: " + PostgresError.redact(String(cString: PQerrorMessage(conn))))
        }
        let owned = QueryResult(takingOwnershipOf: result)
        do {
            return try owned.rows(context: context)
        } catch {
            if !isHealthy || error.isServerGone { throw .connection("PostgreSQL connection lost (\(error.sqlState ?? "no SQLSTATE"))") }
            throw error
        }
    }
}
