import Foundation
import SMART
import Synchronization

/// The time by which a refresh must have finished, counted from its start: waiting for a
/// slot (`RefreshGate`), discovery and the token request included. A refresh still running
/// then ends with `expired`, which the refresher answers as an EHR outage (503, the session
/// kept). Timers are Dispatch timers: they fire on time even when the Swift concurrency pool
/// is busy, where a sleeping task could wake seconds late.
struct RefreshDeadline: Sendable {
    /// How long the refresh may take.
    let limit: Duration
    private let end: DispatchTime

    /// A deadline `limit` from now.
    init(_ limit: Duration) {
        self.limit = limit
        end = .now() + .nanoseconds(Int(clamping: Int64(limit.seconds * 1e9)))
    }

    /// The error of a refresh that did not finish in time.
    var expired: SMARTError { SMARTError(.timeout, "the refresh did not finish within \(Int(limit.seconds.rounded(.up))) s") }

    /// Runs `timer` at the deadline (at once if it has passed) unless it is cancelled first.
    func schedule(_ timer: DispatchWorkItem) {
        DispatchQueue.global().asyncAfter(deadline: end, execute: timer)
    }

    /// Whether the deadline has passed.
    var hasPassed: Bool { DispatchTime.now() >= end }

    /// What `body` returns, unless the deadline comes first: then `body`'s task is cancelled
    /// (the HTTP client drops its request) and `expired` is thrown once it has ended. For a
    /// hard limit on one request; a refresh's callers use `wait(for:)`.
    func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = Task(operation: body)
        let timer = DispatchWorkItem { task.cancel() }
        schedule(timer)
        defer { timer.cancel() }
        do {
            return try await task.value
        } catch where task.isCancelled { // only the timer cancels it
            throw expired
        }
    }

    /// What `task` returns, unless the deadline comes first: then `expired` is thrown, and
    /// the task goes on (a refresh sent to the EHR finishes and stores what it answers).
    func wait<T: Sendable>(for task: Task<T, any Error>) async throws -> T {
        let first = FirstOutcome<T>()
        let result = await withCheckedContinuation { continuation in
            first.set(continuation)
            // The timer left behind when the task wins finds nothing to resume.
            schedule(DispatchWorkItem { [expired] in first.resume(.failure(expired)) })
            Task { first.resume(await task.result) }
        }
        return try result.get()
    }
}

/// Resumes a continuation with the first of several outcomes; the later ones find it gone.
private final class FirstOutcome<T: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<Result<T, any Error>, Never>?>(nil)

    func set(_ c: CheckedContinuation<Result<T, any Error>, Never>) { continuation.withLock { $0 = c } }

    func resume(_ outcome: Result<T, any Error>) {
        continuation.withLock { $0.take() }?.resume(returning: outcome)
    }
}
