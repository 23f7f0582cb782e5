import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Waits for SIGTERM, SIGINT or SIGHUP (a closed terminal), the signals that start a
/// graceful shutdown: the demo's PostgreSQL is stopped and deleted, the audit trail written.
enum SignalHandling {
    /// From now on SIGTERM, SIGINT and SIGHUP are caught: the caller looks at `received`
    /// between its steps (the demo, whose throwaway cluster must be deleted however early it
    /// is stopped), `wait`s for one once it serves, and for a second while it stops. With
    /// `exitingAtOnce` (serve), one ends the process at once (status 128 + the signal) until
    /// `serving()` is called: start-up (migrations waiting for their lock, say) has nothing to
    /// finish. Caught, they reach a process that is a container's PID 1 too (the kernel
    /// ignores default-action signals to a namespace's init).
    static func catchTermination(exitingAtOnce: Bool = false) -> TerminationSignals {
        signal(SIGPIPE, SIG_IGN)
        return TerminationSignals(exitingAtOnce: exitingAtOnce)
    }
}

import Synchronization

/// SIGTERM, SIGINT and SIGHUP, caught (see `SignalHandling.catchTermination`), and counted:
/// the first starts a graceful stop, a second hastens it. A signal within half a second of the
/// last one counted is the same operator action (a closed terminal sends SIGHUP twice: the
/// shell's to its jobs, the kernel's to the foreground group) and is not counted.
final class TerminationSignals: @unchecked Sendable { // the sources are set once, in init, then only read
    private struct State {
        var count = 0
        var lastCounted: ContinuousClock.Instant?
        var waiters: [(count: Int, done: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())
    private let exitsAtOnce: Atomic<Bool>
    private var sources: [DispatchSourceSignal] = []

    fileprivate init(exitingAtOnce: Bool) {
        exitsAtOnce = Atomic(exitingAtOnce)
        let queue = DispatchQueue(label: "signals")
        for sig in [SIGTERM, SIGINT, SIGHUP] {
            // Until Dispatch has its own handler in place (its manager thread installs it a
            // moment after `resume`), one that ends the process: a signal in between is not
            // lost (ignored, it would be). Callers catch signals before they start anything
            // that would need finishing.
            signal(sig) { received in _exit(128 + received) }
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { [weak self] in self?.fire(sig) }
            source.resume()
            sources.append(source)
        }
    }

    /// The process serves from now on: a signal starts a graceful stop (see `init`).
    func serving() { exitsAtOnce.store(false, ordering: .releasing) }

    /// Whether one of the signals has come.
    var received: Bool { state.withLock { $0.count > 0 } }

    /// Returns once `count` of the signals have come in all (at once if they have).
    func wait(count wanted: Int = 1) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.count >= wanted { return true }
                state.waiters.append((wanted, done))
                return false
            }
            if now { done.resume() }
        }
    }

    private func fire(_ sig: Int32) {
        if exitsAtOnce.load(ordering: .acquiring) { _exit(128 + sig) }
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            let now = ContinuousClock.now
            if let last = state.lastCounted, now - last < .milliseconds(500) { return [] }
            state.lastCounted = now
            state.count += 1
            let received = state.count
            defer { state.waiters.removeAll { $0.count <= received } }
            return state.waiters.filter { $0.count <= received }.map(\.done)
        }
        for waiter in ready { waiter.resume() }
    }
}
