import Synchronization

/// The result of a check that costs a database round trip, computed once for all concurrent
/// callers and reused for `lifetime`: a burst of `/readyz` or `/metrics` requests (a flood,
/// or many probes at once) costs one query, not one pooled connection each.
final class RecentResult<Value: Sendable>: Sendable {
    private struct State {
        var last: (value: Value, at: ContinuousClock.Instant)?
        var running: Task<Value, Never>?
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

    private func value(waitingAtMost limit: Duration, stale useStale: Bool, _ compute: @escaping @Sendable () async -> Value) async -> Value? {
        switch lookup(compute) {
        case let .fresh(value):
            return value
        case let .wait(task, stale):
            let fallback = useStale ? stale : nil
            let answer = Mutex<CheckedContinuation<Value?, Never>?>(nil)
            return await withCheckedContinuation { continuation in
                answer.withLock { $0 = continuation }
                let resume = { @Sendable (value: Value?) in answer.withLock { $0.take() }?.resume(returning: value) }
                let timer = Task { try? await Task.sleep(for: limit); resume(fallback) }
                Task { resume(await task.value); timer.cancel() }
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
                state.withLock { s in (s.running, s.last) = (nil, (value, .now)) }
                return value
            }
            s.running = task
            return .wait(task, stale: s.last?.value)
        }
    }
}
