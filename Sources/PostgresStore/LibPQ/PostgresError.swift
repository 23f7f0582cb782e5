import Foundation
/// A failed database operation. It carries the SQLSTATE and PostgreSQL's primary message
/// with quoted parts removed; bound values never appear in it.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    enum Code: Sendable, Equatable { case connection, query, poolTimeout, decoding, closed }

    let code: Code
    /// The five-character SQLSTATE, when the server sent one.
    public let sqlState: String?
    /// What failed, without values.
    public let message: String

    init(_ code: Code, sqlState: String? = nil, _ message: String) {
        self.code = code
        self.sqlState = sqlState
        self.message = message
    }

    /// The database could not be reached (or the connection broke).
    public var isConnectionFailure: Bool { code == .connection || code == .closed }
    /// No pooled connection became free in time.
    public var isPoolTimeout: Bool { code == .poolTimeout }
    /// SQLSTATE 23505.
    public var isUniqueViolation: Bool { sqlState == "23505" }

    public var description: String {
        "database error\(sqlState.map { " [\($0)]" } ?? ""): \(message)"
    }

    /// Removes `"…"` quoted parts, where PostgreSQL sometimes echoes input values.
    static func redact(_ text: String) -> String {
        if ProcessInfo.processInfo.environment["BFF_DEBUG_SQL"] != nil { return text }
        var out = ""
        var inQuote = false
        for c in text {
            if c == "\"" { inQuote.toggle(); out += inQuote ? "\"…" : "\""; continue }
            if !inQuote { out.append(c) }
        }
        return out
    }
}
