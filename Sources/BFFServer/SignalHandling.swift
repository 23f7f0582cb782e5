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

    static func waitForTermination() async {
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        signal(SIGHUP, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let queue = DispatchQueue(label: "signals")
            let once = Once()
            var sources: [DispatchSourceSignal] = []
            for sig in [SIGTERM, SIGINT, SIGHUP] {
                let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
                source.setEventHandler {
                    if once.fire() {
                        for s in sources { s.cancel() }
                        done.resume()
                    }
                }
                source.resume()
                sources.append(source)
            }
        }
    }
}

import Synchronization

/// True exactly once.
final class Once: Sendable {
    private let fired = Atomic<Bool>(false)
    func fire() -> Bool { !fired.exchange(true, ordering: .relaxed) }
}
