/// Why a token or key was rejected. `description` is generic enough to show a client;
/// `reason` and the context fields are for logs at debug level.
public struct JWTError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Kind: Sendable, Equatable {
        case malformed, unsupportedAlgorithm, criticalHeader, unknownKey, weakKey, badSignature, claim, jwksUnavailable
    }

    public let kind: Kind
    public let reason: String
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
    static func claim(_ name: String, _ reason: String) -> JWTError { JWTError(.claim, reason, claim: name) }

    public var description: String {
        switch kind {
        case .claim: return "ID token rejected: \(failedClaim ?? "claim") \(reason)"
        default: return "ID token rejected: \(reason)"
        }
    }
}
