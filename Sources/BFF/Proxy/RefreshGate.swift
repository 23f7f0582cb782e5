import Foundation
import Synchronization

/// Lets at most `slots` refreshes of this process hold a database connection (and a token
/// row lock) at once, while their EHR answers; the others wait their turn, first come first
/// served, each until its deadline. An EHR whose token endpoint hangs so holds a few
/// connections of the pool, never all of them: every other database-backed request
/// (other EHRs' sessions, `/callback`, `/readyz`) still gets one.
final class RefreshGate: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var free: Int
        var waiters: [Waiter] = []
        var nextWaiter: UInt64 = 0
    }

    private let state: Mutex<State>

    /// A gate with `slots` slots (at least one).
    init(slots: Int) {
        state = Mutex(State(free: max(1, slots)))
    }

    /// Runs `body` in a slot of its own.
    /// - Throws: `deadline.expired` when no slot frees up before the deadline; else what
    ///   `body` throws.
    func withSlot<T: Sendable>(before deadline: RefreshDeadline, _ body: () async throws -> T) async throws -> T {
        guard await enter(before: deadline) else { throw deadline.expired }
        defer { leave() }
        return try await body()
    }

    /// Takes a slot, waiting for one until the deadline; false when the deadline came first.
    private func enter(before deadline: RefreshDeadline) async -> Bool {
        let id = state.withLock { s -> UInt64? in
            if s.free > 0 && s.waiters.isEmpty {
                s.free -= 1
                return nil
            }
            s.nextWaiter += 1
            return s.nextWaiter
        }
        guard let id else { return true }
        let timer = DispatchWorkItem { [weak self] in self?.removeWaiter(id)?.resume(returning: false) }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            state.withLock { $0.waiters.append(Waiter(id: id, continuation: continuation)) }
            deadline.schedule(timer) // once the waiter is in the list, where the timer looks for it
        }
    }

    /// Gives the slot to the first waiter, or frees it.
    private func leave() {
        let next = state.withLock { s -> Waiter? in
            if s.waiters.isEmpty {
                s.free += 1
                return nil
            }
            return s.waiters.removeFirst()
        }
        next?.continuation.resume(returning: true)
    }

    private func removeWaiter(_ id: UInt64) -> CheckedContinuation<Bool, Never>? {
        state.withLock { s in
            guard let index = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return s.waiters.remove(at: index).continuation
        }
    }
}
