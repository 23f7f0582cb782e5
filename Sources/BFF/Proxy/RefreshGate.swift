import Foundation
import Synchronization

/// Lets at most `slots` refreshes of this process hold a database connection (and a token
/// row lock) at once, while their EHR answers; the others wait their turn, first come first
/// served, each until its deadline. An EHR whose token endpoint hangs so holds a few
/// connections of the pool, never all of them: every other database-backed request
/// (other EHRs' sessions, `/callback`, `/readyz`) still gets one. And no one EHR holds more
/// than `perIssuer` slots (half of them, at least one): its hung refreshes leave the
/// others' refreshes slots of their own, where they would otherwise queue behind them.
final class RefreshGate: Sendable {
    private struct Waiter {
        let id: UInt64
        let issuer: String
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var free: Int
        var held: [String: Int] = [:]
        var waiters: [Waiter] = []
        var nextWaiter: UInt64 = 0
    }

    private let state: Mutex<State>
    /// The most slots one issuer's refreshes hold at once.
    let perIssuer: Int

    /// A gate with `slots` slots (at least one), at most half of them (at least one) per issuer.
    init(slots: Int) {
        let slots = max(1, slots)
        state = Mutex(State(free: slots))
        perIssuer = max(1, slots / 2)
    }

    /// Runs `body` in a slot of its own, counted against `issuer`'s share.
    /// - Throws: `deadline.expired` when no slot frees up before the deadline; else what
    ///   `body` throws.
    func withSlot<T: Sendable>(for issuer: String, before deadline: RefreshDeadline, _ body: () async throws -> T) async throws -> T {
        guard await enter(issuer, before: deadline) else { throw deadline.expired }
        defer { leave(issuer) }
        return try await body()
    }

    /// Takes a slot, waiting for one until the deadline; false when the deadline came first
    /// (or had passed already). A slot that is free goes to whoever may take it: the waiters
    /// still waiting then are all of issuers at their share. Whether to wait is decided in
    /// the same critical section that adds the waiter, so no slot can free up unseen between.
    private func enter(_ issuer: String, before deadline: RefreshDeadline) async -> Bool {
        guard !deadline.hasPassed else { return false }
        let id = state.withLock { s -> UInt64 in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        let timer = DispatchWorkItem { [weak self] in self?.removeWaiter(id)?.resume(returning: false) }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let perIssuer = self.perIssuer
            let admitted = state.withLock { s -> Bool in
                if s.free > 0 && s.held[issuer, default: 0] < perIssuer {
                    s.free -= 1
                    s.held[issuer, default: 0] += 1
                    return true
                }
                s.waiters.append(Waiter(id: id, issuer: issuer, continuation: continuation))
                return false
            }
            if admitted { continuation.resume(returning: true) } else { deadline.schedule(timer) }
        }
    }

    /// How many refreshes wait for a slot (for tests).
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Frees `issuer`'s slot, and gives it to the first waiter that may take one.
    private func leave(_ issuer: String) {
        let perIssuer = self.perIssuer
        let next = state.withLock { s -> Waiter? in
            s.held[issuer, default: 1] -= 1
            if s.held[issuer] == 0 { s.held[issuer] = nil }
            s.free += 1
            guard let index = s.waiters.firstIndex(where: { s.held[$0.issuer, default: 0] < perIssuer }) else { return nil }
            let waiter = s.waiters.remove(at: index)
            s.free -= 1
            s.held[waiter.issuer, default: 0] += 1
            return waiter
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
