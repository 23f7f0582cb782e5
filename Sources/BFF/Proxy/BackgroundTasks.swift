import Synchronization

/// Work started in the background that shutdown should still let finish, within its
/// deadline (the revocations of a session that ended on `invalid_grant`).
final class BackgroundTasks: Sendable {
    private let tasks = Mutex<(next: UInt64, running: [UInt64: Task<Void, Never>])>((0, [:]))

    /// Runs `body` in a task of its own, kept until it ends.
    func start(_ body: @escaping @Sendable () async -> Void) {
        tasks.withLock { state in
            let id = state.next
            state.next += 1
            state.running[id] = Task { [self] in
                await body()
                _ = tasks.withLock { $0.running.removeValue(forKey: id) }
            }
        }
    }

    /// How many tasks are running now.
    var running: Int { tasks.withLock { $0.running.count } }

    /// Waits until the tasks running now have ended, or until `deadline`.
    func wait(until deadline: ContinuousClock.Instant) async {
        let running = tasks.withLock { Array($0.running.values) }
        for task in running {
            let waiting = Task<Void, any Error> { await task.value }
            _ = try? await RefreshDeadline(deadline - ContinuousClock.now).wait(for: waiting)
        }
    }
}
