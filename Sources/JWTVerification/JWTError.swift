/// Why a token or key was rejected.
///
/// `description` is generic (fit for a problem response: the kind of failure and, for a
/// claim, its name); `reason`, `kid` and `failedClaim` are context for debug logs and
/// `debugDescription`. Compare `kind` with its static members.
public struct JWTError: Error, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of failure. A struct over a private enum, so that new kinds can be added
    /// without breaking exhaustive `switch`es elsewhere.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        private enum Code: String, Sendable {
            case malformed, unsupportedAlgorithm, criticalHeader, unknownKey, weakKey, badSignature, claim, jwksUnavailable
        }

        private let code: Code
        private init(_ code: Code) { self.code = code }

        /// Not a well-formed compact JWS (size, parts, base64url, JSON, header fields).
        public static let malformed = Kind(.malformed)
        /// `alg` is not RS256.
        public static let unsupportedAlgorithm = Kind(.unsupportedAlgorithm)
        /// A `crit` header is present.
        public static let criticalHeader = Kind(.criticalHeader)
        /// No usable key for the token's `kid` (or for a token without one).
        public static let unknownKey = Kind(.unknownKey)
        /// A JWKS key fails the key policy (e = 65537, 2048–4096 bits, no ROCA fingerprint).
        public static let weakKey = Kind(.weakKey)
        /// The signature does not verify.
        public static let badSignature = Kind(.badSignature)
        /// A claim fails its rule; `failedClaim` names it.
        public static let claim = Kind(.claim)
        /// The issuer's JWKS could not be fetched or parsed.
        public static let jwksUnavailable = Kind(.jwksUnavailable)

        public var description: String { code.rawValue }
    }

    public let kind: Kind
    /// What exactly was wrong (for logs).
    public let reason: String
    /// The token's `kid`, when known.
    public let kid: String?
    /// The claim that failed (`iss`, `aud`, `exp`, …).
    public let failedClaim: String?

    init(_ kind: Kind, _ reason: String, kid: String? = nil, claim: String? = nil) {
        self.kind = kind
        self.reason = reason
        self.kid = kid
        self.failedClaim = claim
    }

    static func malformed(_ reason: String) -> JWTError { JWTError(.malformed, reason) }
    static func unsupportedAlgorithm(_ alg: String) -> JWTError { JWTError(.unsupportedAlgorithm, "alg \(alg) is not allowed (RS256 only)") }
    static var criticalHeader: JWTError { JWTError(.criticalHeader, "crit header present") }
    static func unknownKey(_ reason: String, kid: String?) -> JWTError { JWTError(.unknownKey, reason, kid: kid) }
    static func weakKey(_ reason: String, kid: String?) -> JWTError { JWTError(.weakKey, reason, kid: kid) }
    static func badSignature(kid: String?) -> JWTError { JWTError(.badSignature, "signature does not verify", kid: kid) }
    static func claim(_ name: String, _ reason: String) -> JWTError { JWTError(.claim, reason, claim: name) }
    static func jwksUnavailable(_ reason: String) -> JWTError { JWTError(.jwksUnavailable, reason) }

    public var description: String {
        switch kind {
        case .claim: return "ID token rejected: the \(failedClaim ?? "") claim is not acceptable"
        case .malformed: return "ID token rejected: malformed token"
        case .unsupportedAlgorithm: return "ID token rejected: signature algorithm not allowed"
        case .criticalHeader: return "ID token rejected: critical header"
        case .unknownKey, .weakKey: return "ID token rejected: no usable signing key"
        case .badSignature: return "ID token rejected: invalid signature"
        default: return "ID token rejected: issuer keys unavailable"
        }
    }

    public var debugDescription: String {
        var text = "JWTError(\(kind)): \(reason)"
        if let kid { text += " kid=\(kid)" }
        if let failedClaim { text += " claim=\(failedClaim)" }
        return text
    }
}
