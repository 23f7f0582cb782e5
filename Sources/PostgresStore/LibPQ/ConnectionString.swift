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
        if let problem = misreadUserInfo(url) { return problem }
        // Values libpq takes here and refuses only when connecting (a failed start, exit 1,
        // which a service manager retries forever); named, never shown.
        for (name, allowed) in enumOptions {
            if let value = options[name].flatMap({ $0 }), !allowed.contains(value) {
                return "\(name) must be one of \(allowed.joined(separator: ", "))"
            }
        }
        for name in integerOptions {
            guard let value = options[name].flatMap({ $0 }) else { continue }
            if name == "port" {
                let ports = value.split(separator: ",", omittingEmptySubsequences: false)
                // An empty entry takes the default port; a number must be one (libpq: 1–65535).
                guard ports.allSatisfy({ $0.isEmpty || integer($0).map { (1...65535).contains($0) } == true }) else {
                    return "port must be a number from 1 to 65535 (or one per host, comma-separated)"
                }
                let hosts = (options["host"].flatMap { $0 } ?? "").split(separator: ",", omittingEmptySubsequences: false)
                if ports.count > 1 && ports.count != hosts.count { return "port names \(ports.count) ports for \(hosts.count) hosts" }
            } else if integer(value[...]) == nil {
                return "\(name) must be a number"
            }
        }
        return nil
    }

    /// Why libpq would read a `postgresql://` URI's user info otherwise than meant: it ends
    /// the user info at the first '@' before any '/', so an '@' or '/' left unencoded in a
    /// user name or password makes the rest of it the host, port or database name, which
    /// connection errors then quote. Refused: more than one '@', or an '@' after a '/'.
    private static func misreadUserInfo(_ url: String) -> String? {
        let lower = url.prefix(13).lowercased()
        guard lower.hasPrefix("postgresql://") || lower.hasPrefix("postgres://") else { return nil }
        let rest = url[url.range(of: "://")!.upperBound...].prefix { $0 != "?" }
        let ats = rest.indices.filter { rest[$0] == "@" }
        let firstSlash = rest.firstIndex(of: "/")
        guard ats.count > 1 || (ats.first.map { at in firstSlash.map { $0 < at } ?? false } ?? false) else { return nil }
        return "an '@' or '/' in the user name, password or database name is not percent-encoded (%40, %2F)"
    }

    /// A decimal integer as libpq's `parse_int_param` reads it: spaces around, a sign.
    private static func integer(_ text: Substring) -> Int? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.count <= 10 else { return nil }
        return Int(trimmed.hasPrefix("+") ? String(trimmed.dropFirst()) : trimmed)
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
        ("channel_binding", ["disable", "prefer", "require"]),
        ("ssl_min_protocol_version", ["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"]),
        ("ssl_max_protocol_version", ["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"]),
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
