/// Why a SMART step failed. `description` is safe to show a client: it never carries a
/// token, code, secret or verifier.
public struct SMARTError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Discovery or metadata was unreachable or unusable (502).
        case discovery
        /// The EHR's token endpoint failed or answered badly (502).
        case tokenEndpoint
        /// The EHR did not answer in time (504).
        case timeout
        /// The EHR refused the grant (`invalid_grant`): the session is over.
        case invalidGrant
        /// The ID token was rejected (401).
        case idToken
        /// A bad request from the client (400).
        case badRequest
    }

    public let kind: Kind
    public let detail: String

    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { detail }
}
