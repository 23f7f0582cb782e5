import Foundation

/// Everything smart-bff remembers. Identifiers (session ids, launch ids, `state`, hand-off
/// codes) go in raw and are stored only as their SHA-256; tokens are stored only encrypted.
/// Implementations must make the `consume…` calls atomic: of two concurrent consumers of
/// one value, exactly one wins.
public protocol SessionStore: Sendable {
    // MARK: Pending authorizations

    /// Stores an authorization request under `state`.
    func savePending(state: String, _ pending: PendingAuthorization) async throws
    /// Removes and returns the request for `state` if it exists and has not expired.
    func consumePending(state: String, now: Date) async throws -> PendingAuthorization?

    // MARK: Sessions

    /// Creates a session and returns its new identifier (≥ 128 bits from OpenSSL).
    func createSession(ttl: TimeInterval, now: Date) async throws -> String
    /// A sign-in, all or nothing: creates a session with a new identifier (no fixation),
    /// moves into it the launches of the session `previousSessionID` that have the same user
    /// as `launch` (the same `iss` and the same non-empty `sub`: a launch without `sub` never
    /// moves), deletes that session with its other launches, and adds `launch` with its
    /// tokens. A `previousSessionID` that another sign-in replaced in the last 10 minutes
    /// stands for the live session that replaced it. With `signIn` (a browser's), the session
    /// recorded in the last 10 minutes under any of its bindings (one of the browser's other
    /// sign-ins, storing first) is taken over likewise, and the new session is recorded under
    /// them all; sign-ins that share a binding are serialized. When it throws, nothing has
    /// changed: `previousSessionID` still works, with all its launches.
    /// - Returns: the new session's identifier, and the launches that ended with their
    ///   tokens (for revocation).
    func startSession(with launch: LaunchRecord, tokens: TokenSet, replacing previousSessionID: String?, signIn: BrowserSignIn?,
                      ttl: TimeInterval, now: Date) async throws -> (sessionID: String, ended: [(LaunchRecord, TokenSet)])
    /// Gives the unexpired session whose identifier hashes to `idHash` a new identifier (the
    /// mobile hand-off's session token); nil when there is no such session.
    func rotateSession(idHash: String, ttl: TimeInterval, now: Date) async throws -> String?
    /// The unexpired session with identifier `id`.
    func findSession(id: String, now: Date) async throws -> SessionRecord?
    /// Slides the session's expiry. Implementations may skip the write when the session was
    /// touched recently, so that reads do not each cost a commit.
    /// - Returns: the session's expiry after the call.
    @discardableResult
    func touchSession(_ session: SessionRecord, ttl: TimeInterval, now: Date) async throws -> Date
    /// Deletes the session and its launches; returns the launches' tokens for revocation.
    func deleteSession(id: String) async throws -> [(LaunchRecord, TokenSet)]

    /// The unexpired session `id`, its launch `launchID` (or most recent launch) and that
    /// launch's access token, in one round trip: the FHIR proxy's hot path.
    func proxyContext(sessionID: String, launchID: String?, now: Date) async throws -> ProxyContext?

    /// Deletes the session that holds launch `launchHash` (its grant is gone); returns the
    /// deleted session's hash and its launches that still had tokens, for revocation; nil
    /// when there was none.
    func deleteSession(ofLaunch launchHash: String) async throws -> (sessionHash: String, ended: [(LaunchRecord, TokenSet)])?

    // MARK: Launches and their tokens

    /// Adds a launch (keyed by `launch.idHash`) with its tokens to the session.
    func addLaunch(sessionID: String, _ launch: LaunchRecord, tokens: TokenSet) async throws
    /// The session's launch `launchID`, or its most recent launch when `launchID` is nil.
    func findLaunch(sessionID: String, launchID: String?) async throws -> LaunchRecord?
    /// Deletes one launch of the session; returns its tokens for revocation.
    func deleteLaunch(sessionID: String, launchHash: String) async throws -> TokenSet?
    /// The launch's current tokens.
    func tokens(launchHash: String) async throws -> TokenSet?
    /// Runs `body` while holding the launch's token row lock (across processes), with the
    /// tokens as they are now. What `body` decides (`TokenLockOutcome`: new tokens, stored
    /// with version + 1, or the tokens discarded) is done before the lock is released;
    /// returns what `body` returns, or nil without calling it when the launch has ended (a
    /// logout, maybe in another tab, deleted it, or its tokens were discarded, before the
    /// lock was taken). Used for single-flight refresh. `body` should end
    /// within 35 s (an EHR's answer, connect and read timeouts): a store may end a
    /// transaction left idle much longer, and may give up waiting for a lock after 20 s,
    /// whatever the database's own settings.
    func withTokenLock<T: Sendable>(launchHash: String,
                                    _ body: @Sendable (TokenSet) async throws -> (TokenLockOutcome, T)) async throws -> T?

    // MARK: Mobile hand-off

    /// Stores a single-use hand-off code for the session `sessionHash`.
    func saveHandoff(code: String, sessionHash: String, challenge: String, expiresAt: Date) async throws
    /// Removes and returns (session hash, challenge) for an unexpired code.
    func consumeHandoff(code: String, now: Date) async throws -> (sessionHash: String, challenge: String)?

    // MARK: Audit and upkeep

    /// Appends PHI access audit entries: all of them, or none when it throws (so a caller
    /// may retry the batch without writing any entry twice). An entry whose text the store
    /// cannot keep as it is (NUL, a character the database's encoding lacks) is kept with
    /// its text fields percent-escaped and `textEscaped` set.
    func appendAudit(_ entries: [AuditEntry]) async throws
    /// Appends audit entries as they come, all of them or none, like `appendAudit(_:)`: each
    /// piece `next` returns is sent to the database at once, and when it returns nil the
    /// entries are committed. `next` may wait for entries before it returns. A lock on the
    /// trail held elsewhere (a DBA's `VACUUM FULL`) fails the write after `lockWait`, so that
    /// the caller may retry rather than be held for the lock's length. `batch`, an id new
    /// to this call, is stored with the entries (see `settleAuditBatch`). It throws
    /// `AuditCommitUnanswered` when the commit was sent and its answer lost: then, and only
    /// then, the entries may be stored all the same.
    func appendAudit(lockWait: Duration, batch: [UInt8], streaming next: () async -> [AuditEntry]?) async throws
    /// After a streamed append that threw `AuditCommitUnanswered`: whether its entries were
    /// stored all the same or never will be. A caller that writes the entries again only on
    /// false writes none twice.
    func settleAuditBatch(_ batch: [UInt8]) async throws -> Bool
    /// Calls `body` with the audit entries recorded (stored: `AuditEntry.recordedAt`) at or
    /// after `since` (nil: from the first) and before `until`, in the order recorded, at most
    /// `pageSize` at a time: the trail is never read whole. Each entry comes once, provided
    /// every entry recorded before `until` is committed when the call begins.
    func forEachAuditPage(recordedSince since: AuditInstant?, before until: AuditInstant, pageSize: Int,
                          _ body: ([AuditEntry]) async throws -> Void) async throws
    /// The clock that stamps `AuditEntry.recordedAt` (the database's), now, or earlier: never
    /// after an entry stamped but not yet committed.
    func auditClock() async throws -> AuditInstant
    /// Deletes up to `limit` sessions that expired by `now` and held launches, oldest first;
    /// returns each launch with its tokens, which the caller revokes at the EHR. Concurrent
    /// callers (several instances) take different sessions.
    func endExpiredSessions(now: Date, limit: Int) async throws -> [(LaunchRecord, TokenSet)]
    /// Deletes expired pending authorizations, hand-off codes and sessions without launches
    /// (those with launches go through `endExpiredSessions`, so their tokens are revoked),
    /// and audit entries older than the retention; returns how many rows went.
    func sweepExpired(now: Date, auditRetentionDays: Int) async throws -> Int
}

extension SessionStore {
    /// `startSession` without a browser sign-in's siblings (a mobile hand-off's session).
    public func startSession(with launch: LaunchRecord, tokens: TokenSet, replacing previousSessionID: String?,
                             ttl: TimeInterval, now: Date) async throws -> (sessionID: String, ended: [(LaunchRecord, TokenSet)]) {
        try await startSession(with: launch, tokens: tokens, replacing: previousSessionID, signIn: nil, ttl: ttl, now: now)
    }
}
