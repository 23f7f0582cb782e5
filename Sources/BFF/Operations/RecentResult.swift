import Synchronization

/// The result of a check that costs a database round trip, computed once for all concurrent
/// callers and reused for `lifetime`: a burst of `/readyz` or `/metrics` requests (a flood,
/// or many probes at once) costs one query, not one pooled connection each.
final class RecentResult<Value: Sendable>: Sendable {
    private struct State {
        var last: (value: Value, at: ContinuousClock.Instant)?
        var running: Task<Value, Never>?
    }

    private enum Lookup {
        case fresh(Value)
        case wait(Task<Value, Never>)
    }

    private let lifetime: Duration
    private let state = Mutex(State())

    init(lifetime: Duration) {
        self.lifetime = lifetime
    }

    /// The last result if it is younger than `lifetime`; else the result of the `compute`
    /// already running, or of a new one.
    func value(_ compute: @escaping @Sendable () async -> Value) async -> Value {
        let lookup = state.withLock { s -> Lookup in
            if let last = s.last, ContinuousClock.now - last.at < lifetime { return .fresh(last.value) }
            if let running = s.running { return .wait(running) }
            let task = Task { await compute() }
            s.running = task
            return .wait(task)
        }
        switch lookup {
        case let .fresh(value):
            return value
        case let .wait(task):
            let value = await task.value
            state.withLock { s in
                if s.running == task { (s.running, s.last) = (nil, (value, .now)) }
            }
            return value
        }
    }
}
