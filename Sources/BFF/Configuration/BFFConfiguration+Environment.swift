import Cryptography
import Foundation
import HTTPCore
import JSON
import PostgresStore

extension BFFConfiguration {
    /// Reads the configuration from environment variables (see CONTRACT.md):
    /// - `BFF_LISTEN` (host:port, default `127.0.0.1:8080`)
    /// - `BFF_PUBLIC_URL` (default `http://` + `BFF_LISTEN`)
    /// - `DATABASE_URL` (required)
    /// - `BFF_ISSUERS_FILE` (required; JSON array of registrations)
    /// - `BFF_TOKEN_KEY` (required; base64 of 32 bytes)
    /// - `BFF_TOKEN_KEY_FALLBACKS` (comma-separated earlier keys, same form; beyond the contract)
    /// - `BFF_RETURN_ORIGINS` (comma-separated; default the origin of `BFF_PUBLIC_URL`)
    /// - `BFF_SESSION_TTL` (seconds, default 28800)
    /// - `BFF_LOG_LEVEL` (`debug`, `info`, `warning`, `error`; default `info`)
    /// - `BFF_COOKIE_SAMESITE` (`lax` or `none`; default `lax`)
    /// - `BFF_AUDIT_RETENTION_DAYS` (default 2190)
    /// - `BFF_PROXY_CACHE_SECONDS` (0–60, default 2; beyond the contract, see README)
    /// - `BFF_IO_THREADS` (1–256, default one per core; beyond the contract)
    /// - `BFF_DB_POOL_SIZE` (1–1000, default 16; beyond the contract)
    /// - `BFF_TLS_CA_FILE` (PEM CA certificates for outbound TLS, default the system bundle; beyond the contract)
    /// Every problem is collected and reported together, one line each, naming the variable.
    public static func fromEnvironment(_ env: [String: String] = ProcessInfo.processInfo.environment,
                                       readFile: (String) throws -> [UInt8] = { Array(try Data(contentsOf: URL(fileURLWithPath: $0))) })
        throws(ConfigurationError) -> BFFConfiguration {
        var problems: [String] = []
        // Trimmed as every command reads its variables; a list's items are trimmed likewise.
        func value(_ name: String) -> String? { EnvironmentValue.named(name, in: env) }
        func integer(_ name: String, default fallback: Int, range: ClosedRange<Int>) -> Int {
            guard let text = value(name) else { return fallback }
            guard let n = Int(text), range.contains(n) else {
                problems.append("\(name): expected a whole number in \(range.lowerBound)...\(range.upperBound), got \"\(text)\"")
                return fallback
            }
            return n
        }

        let listen = value("BFF_LISTEN") ?? "127.0.0.1:8080"
        var host = "127.0.0.1", port = 8080
        let listenParsed = parseListen(listen)
        if let listenParsed { (host, port) = listenParsed } else {
            problems.append("BFF_LISTEN: expected host:port with a port in 1...65535 (e.g. 127.0.0.1:8080, [::1]:8080), got \"\(listen)\"")
        }
        var publicURL = value("BFF_PUBLIC_URL") ?? "http://\(listen)"
        while publicURL.hasSuffix("/") { publicURL.removeLast() }
        let publicOrigin = Origin.of(publicURL)
        // Derived from a BFF_LISTEN already reported, the default is not a problem of its own.
        if value("BFF_PUBLIC_URL") != nil || listenParsed != nil {
            if publicOrigin == nil {
                problems.append("BFF_PUBLIC_URL: expected an absolute http(s) URL, got \"\(publicURL)\"")
            } else if let problem = publicURLProblem(publicURL) {
                problems.append("BFF_PUBLIC_URL: \(problem), got \"\(publicURL)\"")
            }
        }

        let databaseURL = value("DATABASE_URL")
        if databaseURL == nil { problems.append("DATABASE_URL: required (a libpq connection string or URI)") }
        if let databaseURL, let problem = ConnectionString.configurationProblem(databaseURL) { problems.append(problem) }

        var issuers: [IssuerRegistration] = []
        if let path = value("BFF_ISSUERS_FILE") {
            do { issuers = try IssuersFile.parse(try readFile(path)) } catch let error as IssuersFile.Problem {
                problems.append("BFF_ISSUERS_FILE: \(error.message)")
            } catch {
                problems.append("BFF_ISSUERS_FILE: cannot read \(path)")
            }
        } else {
            problems.append("BFF_ISSUERS_FILE: required (a JSON file of registered EHRs)")
        }

        var tokenKey: [UInt8] = []
        if let text = value("BFF_TOKEN_KEY") {
            if let bytes = Data(base64Encoded: text), bytes.count == 32 { tokenKey = Array(bytes) } else {
                problems.append("BFF_TOKEN_KEY: expected base64 of exactly 32 random bytes (e.g. `openssl rand -base64 32`)")
            }
        } else {
            problems.append("BFF_TOKEN_KEY: required (base64 of 32 random bytes, e.g. `openssl rand -base64 32`)")
        }

        var fallbackKeys: [[UInt8]] = []
        if let list = value("BFF_TOKEN_KEY_FALLBACKS") {
            for (index, item) in list.split(separator: ",").enumerated() {
                let text = item.trimmingCharacters(in: .whitespacesAndNewlines)
                if let bytes = Data(base64Encoded: text), bytes.count == 32 { fallbackKeys.append(Array(bytes)) } else {
                    problems.append("BFF_TOKEN_KEY_FALLBACKS: key \(index + 1) is not base64 of exactly 32 bytes")
                }
            }
        }

        var returnOrigins = publicOrigin.map { [$0] } ?? []
        if let list = value("BFF_RETURN_ORIGINS") {
            returnOrigins = []
            let items = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
            if items.isEmpty { problems.append("BFF_RETURN_ORIGINS: lists no origin or scheme (leave it unset for the BFF's own origin)") }
            for item in items {
                if let o = Origin.of(item), isBareOrigin(item), publicURLProblem(item) == nil { returnOrigins.append(o) }
                else if isCustomScheme(item) { returnOrigins.append(item.lowercased()) }
                else { problems.append("BFF_RETURN_ORIGINS: \"\(item)\" is neither an origin (https://host[:port], port 1-65535) nor a custom scheme (myapp:)") }
            }
        }

        let sessionTTL = integer("BFF_SESSION_TTL", default: 28_800, range: 60...2_592_000)
        let logLevel = value("BFF_LOG_LEVEL")?.lowercased() ?? "info"
        if let problem = logLevelProblem(logLevel) { problems.append(problem) }
        let sameSiteText = value("BFF_COOKIE_SAMESITE")?.lowercased() ?? "lax"
        let sameSite = SameSite(rawValue: sameSiteText)
        if sameSite == nil { problems.append("BFF_COOKIE_SAMESITE: expected lax or none, got \"\(sameSiteText)\"") }
        if sameSite == SameSite.none, !publicURL.lowercased().hasPrefix("https://") {
            problems.append("BFF_COOKIE_SAMESITE: none needs an https BFF_PUBLIC_URL (browsers require Secure)")
        }
        let retention = integer("BFF_AUDIT_RETENTION_DAYS", default: 2190, range: 1...36_500)
        let proxyCache = integer("BFF_PROXY_CACHE_SECONDS", default: 2, range: 0...60)
        let ioThreads = value("BFF_IO_THREADS") == nil ? nil : integer("BFF_IO_THREADS", default: 1, range: 1...256)
        let poolSize = integer("BFF_DB_POOL_SIZE", default: 16, range: 1...1000)
        let caFile = value("BFF_TLS_CA_FILE")
        if let caFile, let problem = caFileProblem(caFile, readFile: readFile) { problems.append("BFF_TLS_CA_FILE: \(problem)") }

        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }
        return BFFConfiguration(listenHost: host, listenPort: port, publicURL: publicURL,
                                databaseURL: Secret(databaseURL!), issuers: issuers, tokenKey: Secret(tokenKey),
                                tokenKeyFallbacks: Secret(fallbackKeys),
                                returnOrigins: returnOrigins, sessionTTL: sessionTTL, logLevel: logLevel,
                                cookieSameSite: sameSite ?? .lax, auditRetentionDays: retention, proxyCacheSeconds: proxyCache,
                                ioThreads: ioThreads, databasePoolSize: poolSize, tlsCAFile: caFile)
    }

    /// Why `path` cannot serve as the outbound CA bundle, or nil when it can: it must be
    /// readable and hold PEM certificates that OpenSSL reads.
    static func caFileProblem(_ path: String, readFile: (String) throws -> [UInt8]) -> String? {
        guard let pem = try? readFile(path) else { return "cannot read \(path)" }
        switch PEMCertificateBundle.certificateCount(pem) {
        case nil: return "\(path) is not PEM that OpenSSL can read"
        case 0: return "\(path) holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        default: return nil
        }
    }

    /// `host:port`, `[v6]:port`; an IPv6 address needs its brackets (`::1:8080` is ambiguous).
    /// The host is a name or an address literal. The port is written plainly, as the default
    /// public URL and the redirect URI repeat it (`+8080` or `08080` would not match an EHR's
    /// registration), and 0 is refused: those URLs must name the port bound.
    static func parseListen(_ text: String) -> (String, Int)? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        let hostBytes: Set<UInt8>
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            hostBytes = listenNameBytes.union(":%".utf8) // an IPv6 literal, a zone after %
        } else {
            hostBytes = listenNameBytes
        }
        let portText = text[text.index(after: colon)...]
        guard !host.isEmpty, host.utf8.allSatisfy(hostBytes.contains),
              let port = Int(portText), String(port) == portText, (1...65535).contains(port) else { return nil }
        return (host, port)
    }

    /// Letters, digits, `-` and `.`: a host name or an IPv4 literal.
    private static let listenNameBytes = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.".utf8)

    /// What is wrong with a `BFF_LOG_LEVEL` value (lower-cased), or nil.
    public static func logLevelProblem(_ level: String) -> String? {
        ["debug", "info", "warning", "error"].contains(level) ? nil
            : "BFF_LOG_LEVEL: expected debug, info, warning or error, got \"\(level)\""
    }

    /// What is wrong with an absolute http(s) `BFF_PUBLIC_URL` for a base URL that
    /// `/callback` and `/fhir/` are appended to: a query, a fragment, a port out of range.
    static func publicURLProblem(_ url: String) -> String? {
        guard let components = URLComponents(string: url) else { return "not a URL" }
        if components.query != nil { return "a base URL has no query" }
        if components.fragment != nil { return "a base URL has no fragment" }
        if let port = components.port, !(1...65535).contains(port) { return "the port must be in 1...65535" }
        return nil
    }

    /// Whether `url` is an origin and nothing more: no path but `/`, no query, no fragment.
    static func isBareOrigin(_ url: String) -> Bool {
        guard let components = URLComponents(string: url) else { return false }
        return (components.path.isEmpty || components.path == "/") && components.query == nil && components.fragment == nil
    }

    /// `myapp:` style custom schemes (RFC 8252 §7.1 private-use schemes).
    static func isCustomScheme(_ text: String) -> Bool {
        guard text.hasSuffix(":"), text.count > 1 else { return false }
        let scheme = text.dropLast().lowercased()
        guard let first = scheme.first, first.isLetter, scheme != "http", scheme != "https",
              scheme != "javascript", scheme != "data", scheme != "file", scheme != "vbscript" else { return false }
        return scheme.allSatisfy { $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }
    }
}
