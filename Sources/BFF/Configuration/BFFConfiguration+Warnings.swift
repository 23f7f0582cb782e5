import Foundation
import PostgresStore
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
    /// host (the session cookie then lacks `Secure`), a return origin in plain http off this
    /// machine, and a `BFF_TLS_CA_FILE` holding more than certificates (see `caFileWarnings`).
    /// Not refused: an orchestrator may set
    /// `BFF_`-named variables of its own (Kubernetes does, for a Service named bff).
    public static func warnings(_ env: [String: String] = ProcessInfo.processInfo.environment, publicURL: String,
                                readFile: (String) throws -> [UInt8] = { try Array(Data(contentsOf: URL(fileURLWithPath: $0))) }) -> [String] {
        var lines: [String] = []
        for name in env.keys.sorted() where name.hasPrefix("BFF_") && !knownVariables.contains(name) {
            let hint = closestKnownVariable(to: name).map { "; did you mean \($0)?" } ?? ""
            lines.append("\(name) is not a smart-bff setting and is ignored\(hint)")
        }
        if let url = URLComponents(string: publicURL), url.scheme?.lowercased() == "http", let host = url.host,
           !URLPolicy.isLoopback(host) {
            lines.append("BFF_PUBLIC_URL is http on \(host): browsers send the session cookie in cleartext, and it cannot be Secure")
        }
        for origin in (EnvironmentValue.named("BFF_RETURN_ORIGINS", in: env) ?? "").split(separator: ",") {
            let item = origin.trimmingCharacters(in: .whitespacesAndNewlines)
            if let url = URLComponents(string: item), url.scheme?.lowercased() == "http", let host = url.host, !URLPolicy.isLoopback(host) {
                lines.append("BFF_RETURN_ORIGINS lists \(item): sign-ins return to a page sent in cleartext, which anyone on the network can alter")
            }
        }
        if let caFile = EnvironmentValue.named("BFF_TLS_CA_FILE", in: env), let pem = try? readFile(caFile) { lines += caFileWarnings(pem) }
        return lines
    }

    /// Where outbound TLS finds the CA certificates it trusts, for the start-up line: the
    /// CA file, else the system's, unless OpenSSL's `SSL_CERT_FILE` or `SSL_CERT_DIR` move
    /// them (not warned of: distributions and images set them to the defaults' own paths).
    public static func tlsTrust(caFile: String?, env: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let caFile { return caFile }
        let moved = ["SSL_CERT_FILE", "SSL_CERT_DIR"].compactMap { name in env[name].map { "\(name)=\($0)" } }
        return moved.isEmpty ? "system CA bundle" : moved.joined(separator: " ")
    }

    /// What a CA file holds besides certificates: revocation lists, which are not checked
    /// (neither CRLs nor OCSP: an operator who put them there expects otherwise), and private
    /// keys, which do not belong in a trust file and are not read.
    static func caFileWarnings(_ pem: [UInt8]) -> [String] {
        let text = String(decoding: pem, as: UTF8.self)
        var lines: [String] = []
        if text.contains("-----BEGIN X509 CRL-----") {
            lines.append("BFF_TLS_CA_FILE holds certificate revocation lists, which are not read: EHR certificates are not checked for revocation (CRL or OCSP)")
        }
        if text.contains("PRIVATE KEY-----") {
            lines.append("BFF_TLS_CA_FILE holds a private key, which is not read and does not belong in a trust file: keep it elsewhere")
        }
        return lines
    }

    /// The known variable `name` most likely misspells (`closest(to:among:)`).
    static func closestKnownVariable(to name: String) -> String? {
        closest(to: name, among: knownVariables)
    }

    /// The one of `known` that `name` most likely misspells: the nearest within three edits,
    /// else one that begins with the other; nil when none is near.
    static func closest<Names: Sequence<String>>(to name: String, among known: Names) -> String? {
        let scored = known.map { known in
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
