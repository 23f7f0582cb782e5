import Foundation
import Sessions

/// Deletes expired rows and old audit entries every `interval`, in a background task that
/// stops when cancelled (`stop()`) or when the sweeper is released. Expired sessions with
/// launches go first, at most `sessionsPerSweep` a tick, and their tokens to `onEnded`
/// (which revokes them at the EHR). A failed sweep (database down) is reported to `onError`
/// and retried at the next tick.
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
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard !Task.isCancelled else { return }
                do {
                    let ended = try await store.endExpiredSessions(now: now(), limit: sessionsPerSweep)
                    if !ended.isEmpty { await onEnded(ended) }
                    onSweep(ended.count + (try await store.sweepExpired(now: now(), auditRetentionDays: auditRetentionDays)))
                } catch is CancellationError {
                    return
                } catch {
                    onError(error)
                }
            }
        }
    }

    /// Stops sweeping (a sweep in flight finishes its statement).
    public func stop() { task.cancel() }

    /// Waits until the sweeping task has ended (after `stop()`).
    public func wait() async { await task.value }

    deinit { task.cancel() }
}
