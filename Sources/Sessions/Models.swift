import Foundation

/// An authorization request waiting for its callback, keyed by the SHA-256 of `state`.
/// Single-use; lives 10 minutes.
public struct PendingAuthorization: Sendable, Equatable {
    public var iss: String
    /// The PKCE code verifier (a secret until the code is exchanged; stored encrypted).
    public var codeVerifier: String
    public var nonce: String?
    /// The EHR's launch id (EHR launch only).
    public var launch: String?
    /// Where to send the browser afterwards (already checked against the allow-list).
    public var returnTo: String
    /// Mobile hand-off: BASE64URL(SHA256(handoff_verifier)).
    public var handoffChallenge: String?
    public var expiresAt: Date

    public init(iss: String, codeVerifier: String, nonce: String?, launch: String?, returnTo: String,
                handoffChallenge: String?, expiresAt: Date) {
        self.iss = iss
        self.codeVerifier = codeVerifier
        self.nonce = nonce
        self.launch = launch
        self.returnTo = returnTo
        self.handoffChallenge = handoffChallenge
        self.expiresAt = expiresAt
    }
}

/// What a launch knows: one successful callback's identity, scopes and SMART context.
public struct LaunchRecord: Sendable, Equatable {
    /// SHA-256 (hex) of the launch id given to the front end (`bff_launch`); the id itself
    /// is not stored.
    public var idHash: String
    public var iss: String
    public var sub: String
    public var fhirUser: String?
    public var scope: String
    public var patient: String?
    /// SMART launch context as JSON text (patient, encounter, fhirUser, need_patient_banner,
    /// smart_style_url, intent, tenant, fhirContext).
    public var contextJSON: String
    public var createdAt: Date

    public init(idHash: String, iss: String, sub: String, fhirUser: String?, scope: String, patient: String?,
                contextJSON: String, createdAt: Date) {
        self.idHash = idHash
        self.iss = iss
        self.sub = sub
        self.fhirUser = fhirUser
        self.scope = scope
        self.patient = patient
        self.contextJSON = contextJSON
        self.createdAt = createdAt
    }
}

/// A launch's tokens, in the clear only in memory. `version` increases with every refresh,
/// so concurrent refreshers can tell whether someone else already refreshed.
public struct TokenSet: Sendable, Equatable {
    public var accessToken: String
    public var refreshToken: String?
    public var idToken: String?
    public var accessTokenExpiresAt: Date?
    /// The whole token response JSON, extension fields included.
    public var responseJSON: String
    public var version: Int

    public init(accessToken: String, refreshToken: String?, idToken: String?, accessTokenExpiresAt: Date?,
                responseJSON: String, version: Int = 1) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.responseJSON = responseJSON
        self.version = version
    }
}

/// A browser (or mobile) session as the store returns it.
public struct SessionRecord: Sendable, Equatable {
    /// SHA-256 of the session identifier, hex: the row key.
    public var idHash: String
    public var createdAt: Date
    public var lastSeenAt: Date
    public var expiresAt: Date

    public init(idHash: String, createdAt: Date, lastSeenAt: Date, expiresAt: Date) {
        self.idHash = idHash
        self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt
        self.expiresAt = expiresAt
    }
}

/// One proxied FHIR request, for the PHI access audit trail.
public struct AuditEntry: Sendable, Equatable {
    public var id: Int64?
    public var at: Date
    /// SHA-256 (hex) of the launch id: the trail names launches without holding their ids.
    public var launchHash: String
    public var iss: String
    public var sub: String
    public var fhirUser: String?
    public var patient: String?
    public var method: String
    public var pathAndQuery: String
    public var upstreamStatus: Int
    public var bytes: Int64
    /// The text fields were stored percent-escaped because the database refused them as
    /// they were (see `SessionStore.appendAudit`).
    public var textEscaped: Bool
    /// The response did not reach the browser whole: the EHR's body broke off or stalled,
    /// the browser left, or the BFF refused what the EHR sent. `upstreamStatus` is still the
    /// EHR's, and `bytes` what was passed on.
    public var brokenOff: Bool
    /// When the store wrote the entry (its clock at the start of the write; nil until then;
    /// the entries of one write share it). `at` is when the EHR's
    /// answer arrived: the entry is stored after the body streamed, and after any retries
    /// while the database was away.
    public var recordedAt: AuditInstant?

    public init(id: Int64? = nil, at: Date, launchHash: String, iss: String, sub: String, fhirUser: String?, patient: String?,
                method: String, pathAndQuery: String, upstreamStatus: Int, bytes: Int64, textEscaped: Bool = false,
                brokenOff: Bool = false, recordedAt: AuditInstant? = nil) {
        self.id = id
        self.at = at
        self.launchHash = launchHash
        self.iss = iss
        self.sub = sub
        self.fhirUser = fhirUser
        self.patient = patient
        self.method = method
        self.pathAndQuery = pathAndQuery
        self.upstreamStatus = upstreamStatus
        self.bytes = bytes
        self.textEscaped = textEscaped
        self.brokenOff = brokenOff
        self.recordedAt = recordedAt
    }
}

/// What the FHIR proxy needs per request, read in one query: the session, the launch and
/// its access token (the refresh token is read only under the refresh lock).
public struct ProxyContext: Sendable {
    public var session: SessionRecord
    public var launch: LaunchRecord?
    public var accessToken: String?
    public var accessTokenExpiresAt: Date?
    public var tokenVersion: Int

    public init(session: SessionRecord, launch: LaunchRecord?, accessToken: String?, accessTokenExpiresAt: Date?, tokenVersion: Int) {
        self.session = session
        self.launch = launch
        self.accessToken = accessToken
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.tokenVersion = tokenVersion
    }
}

/// What a body run under a launch's token lock decided for its tokens.
public enum TokenLockOutcome: Sendable {
    /// They stay as they are.
    case keep
    /// These replace them (version + 1); with a `scope`, the launch's scope becomes it: the
    /// scope the EHR says the new tokens carry (a refresh may narrow it).
    case replace(TokenSet, scope: String?)
    /// The grant is gone: the tokens are deleted with the lock still held, so that no one
    /// waiting for it sends them again; the launch then has none (it answers 401).
    case discard
    /// The launch cannot go on (its access token is spent and no refresh token came with it):
    /// the launch and its tokens are deleted; the rest of its session stays.
    case endLaunch
}
