import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Waits for SIGTERM, SIGINT or SIGHUP (a closed terminal), the signals that start a
/// graceful shutdown: the demo's PostgreSQL is stopped and deleted, the audit trail written.
enum SignalHandling {
    /// Until `waitForTermination` takes over, SIGTERM, SIGINT and SIGHUP end the process at
    /// once (status 128 + the signal): start-up (migrations waiting for their lock, say) has
    /// nothing to finish. Without a handler, a process that is a container's PID 1 would
    /// not get them at all (the kernel ignores default-action signals to a namespace's init).
    static func exitOnTerminationUntilServing() {
        for sig in [SIGTERM, SIGINT, SIGHUP] {
            signal(sig) { received in _exit(128 + received) }
        }
    }

    /// Returns once one of the signals has come (the sandbox, which has nothing to hurry).
    static func waitForTermination() async {
        await catchTermination().wait()
    }

    /// From now on SIGTERM, SIGINT and SIGHUP are caught, not acted on: the caller looks at
    /// `received` between its steps (the demo, whose throwaway cluster must be deleted however
    /// early it is stopped), `wait`s for one once it serves, and for a second while it stops.
    static func catchTermination() -> TerminationSignals {
        signal(SIGPIPE, SIG_IGN)
        return TerminationSignals()
    }
}

import Synchronization

/// SIGTERM, SIGINT and SIGHUP, caught (see `SignalHandling.catchTermination`), and counted:
/// the first starts a graceful stop, a second hastens it.
final class TerminationSignals: @unchecked Sendable { // the sources are set once, in init, then only read
    private let count = Atomic(0)
    private let waiters = Mutex<[(count: Int, done: CheckedContinuation<Void, Never>)]>([])
    private var sources: [DispatchSourceSignal] = []

    fileprivate init() {
        let queue = DispatchQueue(label: "signals")
        for sig in [SIGTERM, SIGINT, SIGHUP] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { [weak self] in self?.fire() }
            source.resume()
            sources.append(source)
        }
    }

    /// Whether one of the signals has come.
    var received: Bool { count.load(ordering: .acquiring) > 0 }

    /// Returns once `count` of the signals have come in all (at once if they have).
    func wait(count wanted: Int = 1) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let now = waiters.withLock { waiting -> Bool in
                if count.load(ordering: .acquiring) >= wanted { return true }
                waiting.append((wanted, done))
                return false
            }
            if now { done.resume() }
        }
    }

    private func fire() {
        let ready = waiters.withLock { waiting -> [CheckedContinuation<Void, Never>] in
            let received = count.add(1, ordering: .acquiringAndReleasing).newValue
            defer { waiting.removeAll { $0.count <= received } }
            return waiting.filter { $0.count <= received }.map(\.done)
        }
        for waiter in ready { waiter.resume() }
    }
}
