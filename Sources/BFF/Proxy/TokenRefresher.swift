import Foundation
import HTTPCore
import JSON
import PostgresStore
import SMART
import Sessions
import Synchronization

/// Keeps a launch's access token fresh. Refreshes are single-flight: in one process,
/// concurrent callers share one refresh task; across processes, the token row lock makes
/// later comers see the new version and skip their own refresh. The rotated refresh token
/// is stored before the lock is released. Callers wait at most until the refresh's deadline
/// (then 503, the session kept), but a refresh request sent to the EHR is never abandoned
/// for it: it runs until the EHR answers (at most `requestLimit`), and what the
/// EHR answered is stored, so that a rotated refresh token is not lost to a slow EHR. Only
/// a few refreshes at a time hold a database connection (`RefreshLimits`).
actor TokenRefresher {
    private let services: BFFServices
    private let deadline: Duration
    private let gate: RefreshGate
    /// The refreshes under way in this process, by launch, each until the EHR has answered
    /// (or failed), whatever its callers' deadline.
    private var inFlight: [String: Task<TokenSet, any Error>] = [:]
    /// When a refresh of each launch last failed (kept for `pauseAfterFailure`).
    private var lastFailure: [String: ContinuousClock.Instant] = [:]
    private var pruneFailuresAt = 1_000
    /// Set when shutdown begins: no refresh starts, and none sends its request, any more.
    private nonisolated let stopping = Atomic<Bool>(false)
    /// The revocations of sessions ended on `invalid_grant`, which shutdown lets finish.
    private let background = BackgroundTasks()
    /// The longest a token request may take: past it, it is cancelled (its answer, a rotated
    /// refresh token maybe, is lost). It keeps a refresh's hold on the row lock, and its
    /// transaction's idle time, under what other transactions wait for them (45 s and 60 s:
    /// `PostgresSessionStore.tokenReadLimits`, `tokenLockLimits`), whatever the HTTP
    /// client's waits (for a connection to the host, then 30 s without data) add up to.
    static let requestLimit: Duration = .seconds(40)
    /// Refresh when less than this is left of the access token's life (less than half of
    /// it, for tokens that live under two minutes).
    static let margin: TimeInterval = 60

    init(services: BFFServices, limits: RefreshLimits) {
        self.services = services
        deadline = limits.deadline
        gate = RefreshGate(slots: limits.concurrent)
    }

    /// Refreshes waiting for a slot of the gate (for tests).
    nonisolated var waitingForTheirTurn: Int { gate.waiting }

    /// Whether the access token of `tokens` is past its `expires_in` (never, without one).
    nonisolated static func hasExpired(_ tokens: TokenSet, now: Date) -> Bool {
        tokens.accessTokenExpiresAt.map { $0 <= now } ?? false
    }

    /// Whether an access token expiring at `expiresAt` should be refreshed before use.
    nonisolated static func isExpiring(_ expiresAt: Date?, now: Date, margin: TimeInterval = margin) -> Bool {
        expiresAt.map { $0.timeIntervalSince(now) < margin } ?? false
    }

    /// The margin for `tokens`: the fixed one, or half the token's life (its `expires_in`)
    /// when that is shorter, so that a token living a minute or less is not refreshed on
    /// every read. The proxy's hot path uses the fixed margin and asks here when it is
    /// passed, so short-lived tokens cost a database read per request, not a refresh.
    static func margin(for tokens: TokenSet) -> TimeInterval {
        let lifetime = (try? JSONParser.parse(Array(tokens.responseJSON.utf8)))?["expires_in"]?.doubleValue
        return min(margin, (lifetime ?? .infinity) / 2)
    }

    /// The launch's tokens: refreshed first once they have expired, or with `staleVersion`
    /// (after an upstream 401) unless someone already did; about to expire, as they are,
    /// while a refresh runs in the background.
    func tokens(for launch: LaunchRecord, staleVersion: Int? = nil) async throws -> TokenSet {
        guard let current = try await services.store.tokens(launchHash: launch.idHash) else {
            // Deleted since the launch was read (a logout elsewhere), or sealed under a key this instance lacks.
            throw Problems.tokensUnreadable()
        }
        let rejected = staleVersion.map { $0 == current.version } ?? false
        let margin = TokenRefresher.margin(for: current)
        guard TokenRefresher.isExpiring(current.accessTokenExpiresAt, now: services.now(), margin: margin) || rejected else { return current }
        // No refresh token came with it: nothing to refresh early; it serves until it expires.
        if current.refreshToken == nil, !rejected, !TokenRefresher.hasExpired(current, now: services.now()) { return current }
        // Early, the token still serving: the refresh runs in the background, and reads go on
        // with the token meanwhile, or, should the EHR not refresh it now (down, slow), until
        // it expires. After a failure the next attempt waits `pauseAfterFailure`, so that a
        // token endpoint in trouble is not asked at the rate of reads.
        if !rejected && !TokenRefresher.hasExpired(current, now: services.now()) {
            if inFlight[launch.idHash] == nil, !stopping.load(ordering: .relaxed), !failedRecently(launch.idHash) {
                _ = start(launch, seen: current.version, rejected: false)
            }
            return current
        }
        if stopping.load(ordering: .relaxed) && inFlight[launch.idHash] == nil {
            throw TokenRefresher.unavailable(SMARTError(.timeout, "smart-bff is stopping"))
        }
        let task = inFlight[launch.idHash] ?? start(launch, seen: current.version, rejected: rejected)
        do {
            return try await RefreshDeadline(deadline).wait(for: task) // each caller waits its own time
        } catch let error as SMARTError {
            throw TokenRefresher.unavailable(error) // the deadline passed; the refresh goes on
        }
    }

    /// How long after a failed refresh of a launch whose token still serves the next is tried.
    static let pauseAfterFailure: Duration = .seconds(5)

    /// Whether a refresh of `launchHash` failed within `pauseAfterFailure`.
    private func failedRecently(_ launchHash: String) -> Bool {
        guard let at = lastFailure[launchHash] else { return false }
        if ContinuousClock.now - at < TokenRefresher.pauseAfterFailure { return true }
        lastFailure[launchHash] = nil
        return false
    }

    /// Starts refreshing `launch`, whose tokens were at version `seen`; it takes no slot
    /// after its deadline.
    private func start(_ launch: LaunchRecord, seen: Int, rejected: Bool) -> Task<TokenSet, any Error> {
        let deadline = RefreshDeadline(self.deadline)
        let task = Task { [services, gate, background] () async throws -> TokenSet in
            do {
                let tokens = try await TokenRefresher.refresh(launch, seen: seen, rejected: rejected, services: services, gate: gate, deadline: deadline,
                                                              background: background, isStopping: { [weak self] in self?.isStopping ?? true })
                self.finished(launch.idHash, failed: false)
                return tokens
            } catch {
                self.finished(launch.idHash, failed: true)
                throw error
            }
        }
        inFlight[launch.idHash] = task
        return task
    }

    /// From now on no refresh starts, and none not yet sent sends its request: called as
    /// shutdown begins, before the HTTP drain, so that every request sent is one `drain`
    /// waits for.
    nonisolated func beginStopping() { stopping.store(true, ordering: .relaxed) }

    private nonisolated var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// Waits, until `deadline`, for the refreshes under way to end (each may have sent the
    /// EHR a refresh token that its answer rotates, to be stored before the pool closes),
    /// and for the revocations they started.
    func drain(until deadline: ContinuousClock.Instant) async {
        beginStopping()
        for task in inFlight.values {
            _ = try? await RefreshDeadline(deadline - ContinuousClock.now).wait(for: task)
        }
        await background.wait(until: deadline)
    }

    /// A refresh has ended: the next caller reads the tokens afresh.
    private func finished(_ launchHash: String, failed: Bool) {
        inFlight[launchHash] = nil
        if failed {
            // Entries past their pause go as others fail, at twice the size the last pruning left:
            // the map holds about the launches failing now, and is not rebuilt at every failure.
            if lastFailure.count >= pruneFailuresAt {
                lastFailure = lastFailure.filter { ContinuousClock.now - $0.value < TokenRefresher.pauseAfterFailure }
                pruneFailuresAt = max(1_000, 2 * lastFailure.count)
            }
            lastFailure[launchHash] = .now
        } else {
            lastFailure[launchHash] = nil
        }
        services.proxyCache.invalidate(launchHash: launchHash) // new tokens, or the launch ended
    }

    /// The 503 of a refresh that could not be made now: the session is kept.
    private static func unavailable(_ error: SMARTError) -> HTTPError {
        HTTPError(.serviceUnavailable, type: Problems.base + "refresh-unavailable",
                  detail: "The EHR could not refresh the access token (\(error.detail)); the session is kept, try again.")
    }

    /// What a refresh under the token lock came to.
    private enum Outcome: Sendable {
        /// The launch's tokens now: the EHR's new ones, or another instance's.
        case tokens(TokenSet)
        /// The EHR refused the refresh token (`invalid_grant`), or there is none: the tokens
        /// were discarded under the lock, so that no one waiting for it sends them again.
        case grantGone
        /// smart-bff is stopping: nothing was sent.
        case stopping
        /// The access token is spent and there is no refresh token: the launch was deleted
        /// (`TokenLockOutcome.endLaunch`); these tokens are to be revoked.
        case cannotRenew(TokenSet)
    }

    /// Refreshes in a slot of `gate`, under the token row lock, unless another instance
    /// did meanwhile (the version moved on from `seen`). The EHR's token endpoint is known
    /// first (discovery, usually cached), so that no slot or lock waits on it; no slot is
    /// taken after `deadline`, but a request once sent is not cut short by it.
    private static func refresh(_ launch: LaunchRecord, seen: Int, rejected: Bool, services: BFFServices, gate: RefreshGate, deadline: RefreshDeadline,
                                background: BackgroundTasks, isStopping: @escaping @Sendable () -> Bool) async throws -> TokenSet {
        guard let registration = services.registration(for: launch.iss) else { throw Problems.issuerNotRegistered() }
        let answer = Answer()
        let outcome: Outcome?
        do {
            let tokenEndpoint = try await services.metadata.configuration(for: launch.iss).tokenEndpoint
            outcome = try await gate.withSlot(for: launch.iss, before: deadline) {
                try await services.store.withTokenLock(launchHash: launch.idHash) { locked -> (TokenLockOutcome, Outcome) in
                    if locked.version != seen { return (.keep, .tokens(locked)) } // another instance refreshed meanwhile
                    guard let refreshToken = locked.refreshToken else {
                        // No refresh token: the access token serves until it expires or the
                        // EHR refuses it; then this launch ends, and only it (no grant was
                        // refused: the session's other launches are not touched).
                        if !rejected && !hasExpired(locked, now: services.now()) { return (.keep, .tokens(locked)) }
                        return (.endLaunch, .cannotRenew(locked))
                    }
                    guard !isStopping() else { return (.keep, .stopping) } // a request sent now might not be stored
                    do {
                        let response = try await RefreshDeadline(TokenRefresher.requestLimit).run {
                            try await services.tokenClient.refresh(refreshToken: refreshToken, clientID: registration.clientID,
                                                                   authentication: services.authentication(for: registration),
                                                                   tokenEndpoint: tokenEndpoint)
                        }
                        services.metrics.recordRefresh("ok")
                        let next = TokenRefresher.tokens(from: response, replacing: locked, now: services.now())
                        // The scope the EHR says the new tokens carry is what the scope check
                        // goes by from now on: a refresh may narrow it, never widen it (RFC 6749 §6).
                        let scope = response.scope.map { SMARTScopes.narrowed($0, within: launch.scope) }
                        answer.keep(next, scope: scope, held: locked.refreshToken)
                        return (.replace(next, scope: scope), .tokens(next))
                    } catch let error as SMARTError where error.kind == .invalidGrant {
                        return (.discard, .grantGone)
                    }
                }
            }
        } catch let error as SMARTError {
            services.metrics.recordRefresh("failed")
            services.logUpstreamFailure("token refresh failed", iss: launch.iss, error, logger: services.logger)
            throw unavailable(error)
        } catch let error as PostgresError where error.isLockTimeout {
            // Another instance holds the launch's token row lock past our wait for it: its
            // refresh still waits on the EHR. A retry finds its outcome.
            services.metrics.recordRefresh("failed")
            throw unavailable(SMARTError(.timeout, "another instance's refresh of this launch is still waiting on the EHR"))
        } catch let error as PostgresError {
            guard let (next, scope, held) = answer.value else { throw error }
            return try await storeAgain(next, scope: scope, held: held, of: launch, seen: seen, after: error, services: services, background: background)
        }
        switch outcome {
        case nil:
            throw Problems.sessionEnded("This launch has ended (signed out); sign in again.")
        case let .tokens(tokens)?:
            return tokens
        case let .cannotRenew(spent)?:
            services.metrics.recordRefresh("no_refresh_token")
            background.start { await services.revokeTokens(of: [(launch, spent)]) } // the EHR may still take it
            throw Problems.sessionEnded("This launch's access has ended and cannot be renewed: the EHR issued no refresh token. Launch the app again.")
        case .grantGone?:
            services.metrics.recordRefresh("invalid_grant")
            await endSession(of: launch, services: services, background: background)
            throw Problems.sessionEnded()
        case .stopping?:
            throw unavailable(SMARTError(.timeout, "smart-bff is stopping"))
        }
    }

    /// The EHR's answer to a refresh, kept outside the transaction that was to store it.
    /// With the refresh token the launch held when it was sent (`held`).
    private final class Answer: Sendable {
        private let kept = Mutex<(TokenSet, scope: String?, held: String?)?>(nil)
        func keep(_ tokens: TokenSet, scope: String?, held: String?) { kept.withLock { $0 = (tokens, scope, held) } }
        var value: (TokenSet, scope: String?, held: String?)? { kept.withLock { $0 } }
    }

    /// Whether `next`, an answer that is not stored, is to be revoked: only when the launch
    /// cannot go on with what it holds, its refresh token `held` used up by the EHR's
    /// rotation (the answer's differs). An EHR may revoke a whole grant when one of its
    /// tokens is revoked (RFC 7009 §2.1), so revoking an answer of the grant a live launch
    /// still uses could end that launch; such an answer is left to expire, held by no one.
    static func isToBeRevoked(_ next: TokenSet, held: String?) -> Bool {
        next.refreshToken != held
    }

    /// The EHR answered a refresh and the transaction holding the lock then failed (its
    /// connection was lost, the database restarted or failed over): the answer, a rotated
    /// refresh token perhaps, is stored in a new transaction, unless the launch's tokens moved
    /// on from `seen` meanwhile. While the database cannot take it (a failover takes seconds),
    /// it is tried again, backing off, for up to `storeRetryLimit` (not once the pool has
    /// closed, at the end of a shutdown): the refresh token the EHR used up is gone, so
    /// dropping its answer would end the session. Should every try fail, or the database
    /// refuse the values, the new tokens are revoked (the launch keeps the old ones, which a
    /// rotating EHR will refuse) and the error stands.
    private static func storeAgain(_ next: TokenSet, scope: String?, held: String?, of launch: LaunchRecord, seen: Int, after error: PostgresError,
                                   services: BFFServices, background: BackgroundTasks) async throws -> TokenSet {
        let giveUp = ContinuousClock.now + storeRetryLimit
        var pause = Duration.milliseconds(100)
        while true {
            do {
                let stored = try await services.store.withTokenLock(launchHash: launch.idHash) { locked -> (TokenLockOutcome, TokenSet) in
                    // Another instance refreshed meanwhile: the launch goes on with its tokens,
                    // of the same grant as this answer, which is left to expire (`isToBeRevoked`).
                    locked.version == seen ? (.replace(next, scope: scope), next) : (.keep, locked)
                }
                guard let stored else {
                    // Signed out meanwhile (the logout revoked the tokens it found, the ones
                    // these replace): the EHR's new ones must not stay live either.
                    background.start { await services.revokeTokens(of: [(launch, next)]) }
                    throw Problems.sessionEnded("This launch has ended (signed out); sign in again.")
                }
                services.logger.warning("a refresh's answer was stored on a second try", metadata: [
                    "smart.iss": .string(launch.iss), "error": .string(String(describing: type(of: error)))])
                return stored
            } catch let again as PostgresError where again.isTransient && !again.isPoolClosed && ContinuousClock.now + pause < giveUp {
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(2))
            } catch let again as PostgresError {
                if again.isPoolClosed {
                    // Shutdown's wait for refreshes is over: the revocation below may not
                    // get to run before the process ends.
                    services.logger.warning("a refresh's answer could not be stored before the database pool closed: the EHR's new tokens are revoked if there is time",
                                            metadata: ["smart.iss": .string(launch.iss)])
                }
                if isToBeRevoked(next, held: held) { background.start { await services.revokeTokens(of: [(launch, next)]) } }
                throw again
            }
        }
    }

    /// How long a refresh's answer is tried again while the database cannot store it.
    static let storeRetryLimit: Duration = .seconds(30)

    /// The grant of `launch` is gone: so is its session, rather than one that looks alive
    /// while every call fails, and the tokens of its other launches are revoked as at
    /// logout, in a task of its own: the callers waiting for this refresh hear 401 now, not
    /// after EHRs have answered the revocations. Should the delete fail, the launch has no
    /// tokens left and answers 401 anyway.
    private static func endSession(of launch: LaunchRecord, services: BFFServices, background: BackgroundTasks) async {
        do {
            if let (session, ended) = try await services.store.deleteSession(ofLaunch: launch.idHash) {
                services.proxyCache.invalidate(sessionHash: session) // its other launches too
                if !ended.isEmpty { background.start { await services.revokeTokens(of: ended) } }
            }
        } catch {
            services.logger.warning("ending a session after invalid_grant failed", metadata: ["smart.iss": .string(launch.iss), "error": .string(String(describing: error))])
        }
    }

    /// The tokens of the EHR's `response`, keeping those of `old` it did not replace. An ID
    /// token in a refresh's answer is not kept: the sign-in's was validated, this one is not,
    /// and nothing after the sign-in reads one.
    private static func tokens(from response: TokenResponse, replacing old: TokenSet, now: Date) -> TokenSet {
        TokenSet(accessToken: response.accessToken, refreshToken: response.refreshToken ?? old.refreshToken,
                 idToken: old.idToken,
                 accessTokenExpiresAt: response.expiresIn.map { now.addingTimeInterval(TimeInterval($0)) },
                 responseJSON: response.raw.serialized(), version: old.version + 1)
    }
}
