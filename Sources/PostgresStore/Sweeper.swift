import Foundation
import Sessions
import Synchronization

/// Deletes expired rows and old audit entries every `interval`, in a background task that
/// stops when cancelled (`stop()`) or when the sweeper is released. Expired sessions with
/// launches are ended at most `sessionsPerSweep` a tick, and their tokens handed to
/// `onEnded` (which revokes them at the EHR) in a task of its own: a slow EHR holds up
/// neither the rest of the sweep nor `stop()`, and no more sessions are ended until it is
/// done. A failed sweep (database down) is reported to `onError`, once, and retried at the next tick.
public final class Sweeper: Sendable {
    private let task: Task<Void, Never>

    /// Sweeps `store` every `interval`, the first time one interval from now (not at once:
    /// a process starting does not add a database connection for it).
    /// - Parameters:
    ///   - now: the clock (injected for tests).
    ///   - onEnded: called with the launches and tokens of the expired sessions each sweep deleted.
    ///   - onSweep: called with the number of rows removed by each successful sweep.
    ///   - onError: called with each failure.
    public init(store: any SessionStore, interval: Duration = .seconds(60), auditRetentionDays: Int,
                sessionsPerSweep: Int = 500,
                now: @escaping @Sendable () -> Date = { Date() },
                onEnded: @escaping @Sendable ([(LaunchRecord, TokenSet)]) async -> Void = { _ in },
                onSweep: @escaping @Sendable (Int) -> Void = { _ in },
                onError: @escaping @Sendable (any Error) -> Void = { _ in }) {
        task = Task {
            // The revocations of the last sessions ended: an EHR that answers slowly holds them
            // up, not the sweep. While they run, no more sessions are ended (they stay
            // expired, unusable, until a later tick).
            var revoking: (task: Task<Void, Never>, done: DoneFlag)?
            defer { revoking?.task.cancel() }
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard !Task.isCancelled else { return }
                // Expired sessions first, and whatever the rest does: their tokens are revoked
                // even while the audit trail's retention fails, or has years of rows to delete.
                var removed = 0
                do {
                    if revoking?.done.isSet ?? true {
                        let ended = try await store.endExpiredSessions(now: now(), limit: sessionsPerSweep)
                        removed += ended.count
                        if ended.isEmpty { revoking = nil } else {
                            let done = DoneFlag()
                            revoking = (Task { await onEnded(ended); done.set() }, done)
                        }
                    }
                } catch is CancellationError {
                    return
                } catch {
                    onError(error)
                    // The database cannot serve now (down, a failover, read-only, out of
                    // resources): the rest would fail the same way, and is tried at the next
                    // tick. One failure, one report. (A lock on a session's rows leaves the
                    // rest to run.)
                    if let error = error as? PostgresError, error.isTransient && !error.isLockTimeout { continue }
                }
                do {
                    removed += try await store.sweepExpired(now: now(), auditRetentionDays: auditRetentionDays)
                } catch is CancellationError {
                    return
                } catch {
                    onError(error)
                }
                onSweep(removed)
            }
        }
    }

    /// Stops sweeping (a sweep in flight finishes its statement).
    public func stop() { task.cancel() }

    /// Waits until the sweeping task has ended (after `stop()`).
    public func wait() async { await task.value }

    deinit { task.cancel() }
}

/// Set once, from any thread.
private final class DoneFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}
