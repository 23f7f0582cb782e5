import HTTPClient

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
    /// The outbound request's failure, when the EHR could not be reached or answered no
    /// HTTP at all (its `debugDescription` has the cause in OpenSSL's or the system's words, for logs).
    public let cause: HTTPClientError?

    public init(_ kind: Kind, _ detail: String, cause: HTTPClientError? = nil) {
        self.kind = kind
        self.detail = detail
        self.cause = cause
    }

    public var description: String { detail }
}
