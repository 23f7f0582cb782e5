internal import CLibPQ

/// A libpq connection string (URI or key=value), read by libpq itself, for checks before
/// any connection is made.
public enum ConnectionString {
    /// A warning when `url` reaches PostgreSQL over TCP on a host that is not loopback and
    /// does not require TLS: libpq's default `sslmode` (`prefer`) falls back to cleartext
    /// without a word, and the tokens and the PHI audit trail would cross the network in it.
    /// Nil for sockets, loopback, `sslmode` `require` or stricter, or a string libpq cannot read
    /// (connecting reports that).
    public static func transportWarning(_ url: String) -> String? {
        guard let options = values(of: url) else { return nil }
        let mode = options["sslmode"].flatMap { $0 } ?? "prefer"
        guard ["disable", "allow", "prefer"].contains(mode) else { return nil }
        let hosts = (options["host"].flatMap { $0 } ?? "").split(separator: ",").map(String.init)
        let remote = hosts.filter { !$0.isEmpty && !$0.hasPrefix("/") && !$0.hasPrefix("@") && !isLoopback($0) }
        guard !remote.isEmpty else { return nil }
        return "DATABASE_URL reaches \(remote.joined(separator: ", ")) with sslmode=\(mode): libpq may connect in cleartext;"
            + " set sslmode=verify-full (or require) for a database on another host"
    }

    /// Why libpq cannot read `url` (its message, quoted parts removed: they may hold a
    /// password), or why it would misread it, or nil.
    public static func problem(_ url: String) -> String? {
        var error: UnsafeMutablePointer<CChar>?
        guard let parsed = PQconninfoParse(url, &error) else {
            defer { if let error { PQfreemem(error) } }
            let message = error.map { String(cString: $0) } ?? "out of memory"
            return PostgresError.redact(message).split(whereSeparator: \.isNewline).joined(separator: " ")
        }
        PQconninfoFree(parsed)
        // postgresql://user:p@ss@host/db: libpq ends the password at the first '@', and would
        // name the rest of it as the host in its connection errors.
        let hosts = (values(of: url)?["host"].flatMap { $0 } ?? "").split(separator: ",")
        if hosts.contains(where: { $0.dropFirst().contains("@") }) {
            return "a host name holds '@' (percent-encode an '@' in the password as %40)"
        }
        return nil
    }

    /// Every option libpq reads from `url`, by keyword (nil values: not given); nil when
    /// libpq cannot parse it.
    static func values(of url: String) -> [String: String?]? {
        var error: UnsafeMutablePointer<CChar>?
        guard let parsed = PQconninfoParse(url, &error) else {
            if let error { PQfreemem(error) }
            return nil
        }
        defer { PQconninfoFree(parsed) }
        var result: [String: String?] = [:]
        var option = parsed
        while let keyword = option.pointee.keyword {
            result[String(cString: keyword)] = option.pointee.val.map { String(cString: $0) }
            option += 1
        }
        return result
    }

    private static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}
