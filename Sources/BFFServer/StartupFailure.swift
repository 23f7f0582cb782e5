import HTTPCore
import PostgresStore

/// The line a command ends with when it cannot start: a database that cannot be reached is
/// `DATABASE_URL`'s problem, said with libpq's reason (redacted: no password, no quoted
/// values), and an address that cannot be listened on `BFF_LISTEN`'s, so that an operator
/// knows what to fix.
enum StartupFailure {
    static func line(for error: any Error) -> String {
        if let error = error as? PostgresError, error.isConnectionFailure {
            // libpq's message spans lines ("\n\tIs the server running…"): one line here.
            let reason = error.message.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            return "DATABASE_URL: " + (reason.hasPrefix("cannot connect") ? reason : "cannot connect to PostgreSQL: " + reason)
        }
        if let error = error as? SocketError { return "BFF_LISTEN: cannot listen: \(error)" } // binding is all start-up does with sockets
        // What failed and PostgreSQL's reason, redacted (no value it echoed).
        if let error = error as? PostgresError { return error.debugDescription }
        return String(describing: error)
    }
}
