import Foundation
import SMART

extension BFFConfiguration {
    /// Every `BFF_` variable smart-bff reads: the configuration's, and those the migrations,
    /// the OpenAPI document and the embedded PostgreSQL are found by.
    static let knownVariables: Set<String> = [
        "BFF_LISTEN", "BFF_PUBLIC_URL", "BFF_ISSUERS_FILE", "BFF_TOKEN_KEY", "BFF_TOKEN_KEY_FALLBACKS",
        "BFF_RETURN_ORIGINS", "BFF_SESSION_TTL", "BFF_LOG_LEVEL", "BFF_COOKIE_SAMESITE", "BFF_AUDIT_RETENTION_DAYS",
        "BFF_PROXY_CACHE_SECONDS", "BFF_IO_THREADS", "BFF_DB_POOL_SIZE", "BFF_TLS_CA_FILE",
        "BFF_MIGRATIONS_DIR", "BFF_OPENAPI_FILE", "BFF_PG_BIN",
    ]

    /// What start-up should warn about, one line each: `BFF_` variables smart-bff does not
    /// read (a misspelt `BFF_AUDIT_RETENTION_DAYS` would otherwise leave the default in
    /// force, silently), and a public URL that browsers reach over plain http from another
    /// host (the session cookie then lacks `Secure`). Not refused: an orchestrator may set
    /// `BFF_`-named variables of its own (Kubernetes does, for a Service named bff).
    public static func warnings(_ env: [String: String] = ProcessInfo.processInfo.environment, publicURL: String) -> [String] {
        var lines: [String] = []
        for name in env.keys.sorted() where name.hasPrefix("BFF_") && !knownVariables.contains(name) {
            let hint = closestKnownVariable(to: name).map { "; did you mean \($0)?" } ?? ""
            lines.append("\(name) is not a smart-bff setting and is ignored\(hint)")
        }
        if let url = URLComponents(string: publicURL), url.scheme?.lowercased() == "http", let host = url.host,
           !URLPolicy.isLoopback(host) {
            lines.append("BFF_PUBLIC_URL is http on \(host): browsers send the session cookie in cleartext, and it cannot be Secure")
        }
        return lines
    }

    /// The known variable `name` most likely misspells: the nearest within three edits, else
    /// one that begins with the other.
    static func closestKnownVariable(to name: String) -> String? {
        let scored = knownVariables.map { known in
            let distance = editDistance(Array(name.utf8), Array(known.utf8))
            return (known, distance <= 3 ? distance : known.hasPrefix(name) || name.hasPrefix(known) ? 4 : Int.max)
        }
        return scored.filter { $0.1 <= 4 }.min { ($0.1, $0.0) < ($1.1, $1.0) }?.0
    }

    /// Levenshtein distance.
    private static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }
}
