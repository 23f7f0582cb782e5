import Foundation

/// Everything smart-bff is configured with. Read it with `BFFConfiguration.fromEnvironment`,
/// which validates every variable and reports every problem at once.
public struct BFFConfiguration: Sendable {
    public enum SameSite: String, Sendable { case lax, none }

    /// `BFF_LISTEN`: host to bind.
    public var listenHost: String
    /// `BFF_LISTEN`: port to bind.
    public var listenPort: Int
    /// `BFF_PUBLIC_URL` without a trailing slash; the redirect URI is `publicURL + "/callback"`.
    public var publicURL: String
    /// `DATABASE_URL`: a libpq connection string or URI.
    public var databaseURL: Secret<String>
    /// `BFF_ISSUERS_FILE`, parsed.
    public var issuers: [IssuerRegistration]
    /// `BFF_TOKEN_KEY`: 32 bytes for AES-256-GCM.
    public var tokenKey: Secret<[UInt8]>
    /// `BFF_TOKEN_KEY_FALLBACKS`: earlier token keys, 32 bytes each, that still open stored
    /// tokens but never seal (for rotating `tokenKey` without ending sessions).
    public var tokenKeyFallbacks: Secret<[[UInt8]]>
    /// `BFF_RETURN_ORIGINS`: origins (`https://app.example`) and custom schemes (`myapp:`).
    public var returnOrigins: [String]
    /// `BFF_SESSION_TTL`, seconds.
    public var sessionTTL: Int
    /// `BFF_LOG_LEVEL`.
    public var logLevel: String
    /// `BFF_COOKIE_SAMESITE`.
    public var cookieSameSite: SameSite
    /// `BFF_AUDIT_RETENTION_DAYS`.
    public var auditRetentionDays: Int
    /// `BFF_PROXY_CACHE_SECONDS`: how long one instance may reuse a session's launch and
    /// access token for FHIR reads before asking the database again (0: every read asks).
    /// A logout on another instance takes effect here within this time.
    public var proxyCacheSeconds: Int
    /// `BFF_IO_THREADS`: HTTP I/O threads; nil for one per core.
    public var ioThreads: Int?
    /// `BFF_DB_POOL_SIZE`: PostgreSQL connections per instance.
    public var databasePoolSize: Int
    /// `BFF_TLS_CA_FILE`: a PEM file of the CA certificates trusted for outbound TLS (EHR
    /// discovery, token, JWKS and FHIR requests) in place of the system bundle; nil for the
    /// system bundle.
    public var tlsCAFile: String?

    /// Whether the public URL is https (then cookies are `Secure` and `__Host-` prefixed).
    public var isSecure: Bool { publicURL.lowercased().hasPrefix("https://") }

    /// The OAuth redirect URI.
    public var redirectURI: String { publicURL + "/callback" }

    public init(listenHost: String, listenPort: Int, publicURL: String, databaseURL: Secret<String>,
                issuers: [IssuerRegistration], tokenKey: Secret<[UInt8]>, tokenKeyFallbacks: Secret<[[UInt8]]> = Secret([]),
                returnOrigins: [String],
                sessionTTL: Int = 28_800, logLevel: String = "info", cookieSameSite: SameSite = .lax,
                auditRetentionDays: Int = 2190, proxyCacheSeconds: Int = 2, ioThreads: Int? = nil, databasePoolSize: Int = 16,
                tlsCAFile: String? = nil) {
        self.listenHost = listenHost
        self.listenPort = listenPort
        self.publicURL = publicURL
        self.databaseURL = databaseURL
        self.issuers = issuers
        self.tokenKey = tokenKey
        self.tokenKeyFallbacks = tokenKeyFallbacks
        self.returnOrigins = returnOrigins
        self.sessionTTL = sessionTTL
        self.logLevel = logLevel
        self.cookieSameSite = cookieSameSite
        self.auditRetentionDays = auditRetentionDays
        self.proxyCacheSeconds = proxyCacheSeconds
        self.ioThreads = ioThreads
        self.databasePoolSize = databasePoolSize
        self.tlsCAFile = tlsCAFile
    }
}

/// Why the configuration was refused: one line per problem, each naming its variable.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let problems: [String]
    public var description: String { problems.joined(separator: "\n") }
}
