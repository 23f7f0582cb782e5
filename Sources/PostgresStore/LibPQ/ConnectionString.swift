internal import CLibPQ
import Glibc

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
        guard let options = values(of: url) else { return "libpq cannot read it" }
        // postgresql://user:p@ss@host/db: libpq ends the password at the first '@', and would
        // name the rest of it as the host in its connection errors.
        let hosts = (options["host"].flatMap { $0 } ?? "").split(separator: ",", omittingEmptySubsequences: false)
        if hosts.contains(where: { $0.dropFirst().contains("@") }) {
            return "a host name holds '@' (percent-encode an '@' in the password as %40)"
        }
        // Values libpq takes here and refuses only when connecting (a failed start, exit 1,
        // which a service manager retries forever); named, never shown.
        for (name, allowed) in enumOptions {
            if let value = options[name].flatMap({ $0 }), !allowed.contains(value) {
                return "\(name) must be one of \(allowed.joined(separator: ", "))"
            }
        }
        for name in integerOptions {
            guard let value = options[name].flatMap({ $0 }) else { continue }
            let parts = value.split(separator: ",", omittingEmptySubsequences: false)
            if !parts.allSatisfy({ $0.isEmpty || ($0.count <= 9 && $0.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })) }) {
                return "\(name) must be a number" + (name == "port" ? " (or one per host, comma-separated)" : "")
            }
        }
        return nil
    }

    /// The line a start refuses `url` with (a configuration error), or nil: `problem`, naming the variable.
    public static func configurationProblem(_ url: String) -> String? {
        problem(url).map { "DATABASE_URL: unusable connection string: \($0)" }
    }

    /// Options whose value libpq checks only when it connects, and the values it takes.
    private static let enumOptions: [(String, [String])] = [
        ("sslmode", ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]),
        ("gssencmode", ["disable", "prefer", "require"]),
        ("target_session_attrs", ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"]),
    ]
    private static let integerOptions = ["port", "connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                                         "keepalives_count", "tcp_user_timeout"]

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

    /// `localhost`, `::1`, or a dotted IPv4 address in 127.0.0.0/8 (not a name that only
    /// starts like one, `127.db.example`).
    private static func isLoopback(_ host: String) -> Bool {
        var address = in_addr()
        guard host != "localhost", host != "::1" else { return true }
        return inet_pton(AF_INET, host, &address) == 1 && UInt32(bigEndian: address.s_addr) >> 24 == 127
    }
}
