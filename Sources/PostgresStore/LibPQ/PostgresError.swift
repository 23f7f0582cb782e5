/// A failed database operation, designed like postgres-nio's `PSQLError`: a struct with a
/// private code, static factories and context (SQLSTATE, which statement failed).
///
/// Nothing in it ever holds a bound value: `message` is PostgreSQL's primary message with
/// every double-quoted part (where the server echoes input) replaced by `"…"`, and the
/// server's DETAIL field (which may quote key values) is never read. `description` is
/// generic; `debugDescription` adds the redacted server message.
public struct PostgresError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    private enum Code: String, Sendable {
        case connection = "connection failed"
        case query = "statement failed"
        case poolTimeout = "no connection free in time"
        case decoding = "unexpected column value"
        case closed = "connection pool closed"
        case migration = "migration failed"
        case invalidParameter = "parameter not representable"
    }

    private let code: Code
    /// The five-character SQLSTATE, when the server sent one.
    public let sqlState: String?
    /// What failed, without values (redacted server message or our own text).
    public let message: String
    /// A short name for the statement or operation that failed, when known (never SQL values).
    public let context: String?

    private init(_ code: Code, sqlState: String? = nil, message: String, context: String? = nil) {
        self.code = code
        self.sqlState = sqlState
        self.message = message
        self.context = context
    }

    /// This error, naming `context` as what failed when it names nothing yet.
    func within(_ context: String) -> PostgresError {
        PostgresError(code, sqlState: sqlState, message: message, context: self.context ?? context)
    }

    /// The server could not be reached, or the connection broke.
    static func connection(_ message: String) -> PostgresError { PostgresError(.connection, message: message) }
    /// The server refused a statement.
    static func query(sqlState: String?, serverMessage: String, context: String? = nil) -> PostgresError {
        PostgresError(.query, sqlState: sqlState, message: redact(serverMessage, sqlState: sqlState), context: context)
    }
    /// No pooled connection became free within the acquire timeout.
    static func poolTimeout(_ waited: Duration) -> PostgresError {
        PostgresError(.poolTimeout, message: "no database connection became free within \(waited)")
    }
    /// A column did not hold what the caller asked for.
    static func decoding(column: Int, expected: String) -> PostgresError {
        PostgresError(.decoding, message: "column \(column) is not \(expected)")
    }
    /// The pool was closed.
    static var closed: PostgresError { PostgresError(.closed, message: "the connection pool is closed") }
    /// A migration file or the migration history is unusable.
    static func migration(_ message: String) -> PostgresError { PostgresError(.migration, message: message) }

    /// Bound parameter `index` (1-based) cannot be sent: text holding a NUL character, which
    /// PostgreSQL text cannot store and a C string would silently cut short.
    static func invalidParameter(_ index: Int) -> PostgresError {
        PostgresError(.invalidParameter, message: "parameter $\(index) holds a NUL character")
    }

    /// The database could not be reached (or the connection broke, or the pool is closed).
    public var isConnectionFailure: Bool { code == .connection || code == .closed }
    /// No pooled connection became free in time.
    public var isPoolTimeout: Bool { code == .poolTimeout }
    /// The pool was closed (the process is stopping): trying again cannot succeed.
    public var isPoolClosed: Bool { code == .closed }
    /// The server refused a value itself (SQLSTATE class 22, data exception, such as NUL in
    /// text or a character the database encoding lacks; class 23, integrity constraint; class
    /// 54, program limit): sending the same values again fails again.
    public var isRefusedValue: Bool {
        guard let sqlState else { return false }
        return sqlState.hasPrefix("22") || sqlState.hasPrefix("23") || sqlState.hasPrefix("54")
    }
    /// A failure that says nothing about the request, only that the database cannot serve it
    /// now, so that the same request may succeed later: the server unreachable, gone or
    /// starting (class 08, 57P01–57P03), no pooled connection free, a lock or statement
    /// timeout (55P03, 57014), a read-only server (25006: a standby, a failover under way),
    /// insufficient resources (class 53: too many connections, disk full), a serialization
    /// failure or deadlock (40001, 40P01).
    public var isTransient: Bool {
        if isConnectionFailure || isPoolTimeout || isServerGone || isLockTimeout { return true }
        guard let sqlState else { return false }
        return isReadOnly || sqlState.hasPrefix("53") || sqlState == "40001" || sqlState == "40P01"
    }
    /// SQLSTATE 25006 (read_only_sql_transaction): a write on a server that takes none.
    public var isReadOnly: Bool { sqlState == "25006" }
    /// SQLSTATE 23505 (unique_violation).
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// A lock wait or a statement ended by `lock_timeout` (55P03) or `statement_timeout` (57014).
    public var isLockTimeout: Bool { sqlState == "55P03" || sqlState == "57014" }
    /// A `COMMIT` failed this way, and may have landed all the same: the connection broke
    /// (or the server went away) before the answer came. Any other failed `COMMIT` was
    /// refused by the server, and its transaction rolled back.
    public var leavesCommitUnknown: Bool { isConnectionFailure || isServerGone }
    /// SQLSTATE class 08 (connection exception) or 57P01-57P03 (server shutting down or restarting).
    var isServerGone: Bool {
        guard let sqlState else { return false }
        return sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(sqlState)
    }

    public var description: String {
        "database error: \(code.rawValue)" + (sqlState.map { " (SQLSTATE \($0))" } ?? "")
    }

    public var debugDescription: String {
        description + (context.map { " in \($0)" } ?? "") + ": " + message
    }

    /// Removes double-quoted parts, where PostgreSQL and libpq echo input values
    /// (`invalid input syntax for type integer: "…"`). Values are quoted without their own
    /// quotes escaped, so quotes cannot be paired where a value may be quoted: without an
    /// SQLSTATE (libpq's own messages, which quote the connection string's parts) or in class
    /// 22 (data exceptions), or with an odd number of quotes, everything from the first quote
    /// to the last goes. Elsewhere the quoted parts are schema names (`violates foreign key
    /// constraint "…"`), each removed on its own so that the words between them stay.
    static func redact(_ text: String, sqlState: String? = nil) -> String {
        let text = text.trimmingWhitespace()
        guard let first = text.firstIndex(of: "\"") else { return String(text) }
        let quotes = text.reduce(0) { $0 + ($1 == "\"" ? 1 : 0) }
        let valuesQuoted = sqlState.map { $0.hasPrefix("22") } ?? true
        guard valuesQuoted || quotes % 2 == 1 else {
            var out = ""
            var inQuote = false
            for c in text {
                if c == "\"" {
                    inQuote.toggle()
                    out += inQuote ? "\"…" : "\""
                } else if !inQuote {
                    out.append(c)
                }
            }
            return out
        }
        let last = text.lastIndex(of: "\"")!
        guard last != first else { return text[..<first] + "\"…" }
        return text[..<first] + "\"…\"" + text[text.index(after: last)...]
    }
}

extension String {
    func trimmingWhitespace() -> Substring {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return self[first...last]
    }
}
