import Synchronization

/// The result of a check that costs a database round trip, computed once for all concurrent
/// callers and reused for `lifetime`: a burst of `/readyz` or `/metrics` requests (a flood,
/// or many probes at once) costs one query, not one pooled connection each.
final class RecentResult<Value: Sendable>: Sendable {
    private struct State {
        var last: (value: Value, at: ContinuousClock.Instant)?
        var running: Task<Value, Never>?
        /// Callers waiting at most a while (`value(waitingAtMost:)`), resumed by the running
        /// computation's end or their own timer, whichever comes first.
        var waiters: [UInt64: CheckedContinuation<Value?, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let lifetime: Duration
    private let state = Mutex(State())

    init(lifetime: Duration) {
        self.lifetime = lifetime
    }

    /// The last result if it is younger than `lifetime`; else the result of the `compute`
    /// already running, or of a new one.
    func value(_ compute: @escaping @Sendable () async -> Value) async -> Value {
        switch lookup(compute) {
        case let .fresh(value): value
        case let .wait(task, _): await task.value
        }
    }

    /// As `value(_:)`, but waiting at most `limit` for a result being computed: past it, the
    /// last result however old (nil when there is none), while the computation goes on for
    /// later callers. For `/metrics`, which must answer while the database does not.
    func value(waitingAtMost limit: Duration, _ compute: @escaping @Sendable () async -> Value) async -> Value? {
        await value(waitingAtMost: limit, stale: true, compute)
    }

    /// As `value(waitingAtMost:_:)`, but nil past `limit`, never an older result: for
    /// `/readyz`, where a check that does not end in time says the database does not answer.
    func value(within limit: Duration, _ compute: @escaping @Sendable () async -> Value) async -> Value? {
        await value(waitingAtMost: limit, stale: false, compute)
    }

    /// A waiter is kept in `State` (not in a task awaiting the computation: with the database
    /// hung, one such task per call stayed until it answered, and a flood of calls, each
    /// answered at its limit, grew memory without bound); what outlives a call is its timer,
    /// for `limit` at most.
    private func value(waitingAtMost limit: Duration, stale useStale: Bool, _ compute: @escaping @Sendable () async -> Value) async -> Value? {
        switch lookup(compute) {
        case let .fresh(value):
            return value
        case let .wait(_, stale):
            let fallback = useStale ? stale : nil
            return await withCheckedContinuation { continuation in
                let id: UInt64? = state.withLock { s in
                    guard s.running != nil else { return nil } // it ended meanwhile: its result is in `last`
                    let id = s.nextWaiter
                    s.nextWaiter += 1
                    s.waiters[id] = continuation
                    return id
                }
                guard let id else { return continuation.resume(returning: state.withLock { $0.last?.value } ?? fallback) }
                Task { [self] in
                    try? await Task.sleep(for: limit)
                    state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: fallback)
                }
            }
        }
    }

    private enum Lookup {
        case fresh(Value)
        case wait(Task<Value, Never>, stale: Value?)
    }

    private func lookup(_ compute: @escaping @Sendable () async -> Value) -> Lookup {
        state.withLock { s in
            if let last = s.last, ContinuousClock.now - last.at < lifetime { return .fresh(last.value) }
            if let running = s.running { return .wait(running, stale: s.last?.value) }
            // The computation records its own result, whether or not anyone still waits for it.
            let task = Task { [self] in
                let value = await compute()
                let waiting = state.withLock { s in
                    (s.running, s.last) = (nil, (value, .now))
                    defer { s.waiters = [:] }
                    return s.waiters.values
                }
                for waiter in waiting { waiter.resume(returning: value) }
                return value
            }
            s.running = task
            return .wait(task, stale: s.last?.value)
        }
    }
}
