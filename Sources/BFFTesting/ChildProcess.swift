import Foundation
import PostgresStore
import Synchronization

/// A program a test starts and stops as an operator would (`smart-bff serve`, an export),
/// through `Subprocess.spawn`: Foundation's `Process.run()` crashes now and then in a test
/// process with many descriptors open (see `Subprocess`). Should the test process end
/// without stopping it (a Ctrl-C, a kill), a watchdog sends it SIGTERM.
public final class ChildProcess: Sendable {
    /// The child's process id.
    public let pid: Int32
    /// Its exit status, once reaped (`Subprocess.exitStatus`).
    private let reaped = Mutex<Int32?>(nil)
    /// Stops the child should this process end first; dismissed once the child is reaped.
    private let watchdog: ExitWatchdog

    /// The watchdog's work, with the child's pid as `$0` and the program it runs as `$1`:
    /// SIGTERM, if that process is still the one started (its command line names the program).
    private static let stop = """
        if tr '\\0' '\\n' < "/proc/$0/cmdline" 2>/dev/null | grep -qxF -- "$1"; then kill -TERM "$0"; fi
        """

    /// Starts `executable` with `arguments` in `environment` (nothing of the test's own),
    /// standard output appended to `outputPath`, standard error to `errorPath` or with the
    /// output. `program`: what the child runs in the end, when `executable` is a wrapper that
    /// becomes it (`/bin/sh -c '… exec "$0"' program`).
    public init(_ executable: String, _ arguments: [String], environment: [String: String],
                outputPath: String, errorPath: String? = nil, program: String? = nil) throws {
        let pid = try Subprocess.spawn(executable, arguments, environment: environment, outputPath: outputPath, errorPath: errorPath)
        self.pid = pid
        do {
            watchdog = try ExitWatchdog(script: ChildProcess.stop, arguments: [String(pid), program ?? executable])
        } catch {
            kill(pid, SIGKILL)
            _ = Subprocess.waitForExit(pid)
            throw error
        }
    }

    /// Whether it has not exited yet (reaping it if it has).
    public var isRunning: Bool {
        reaped.withLock { status in
            guard status == nil else { return false }
            var raw: Int32 = 0
            switch waitpid(pid, &raw, WNOHANG) {
            case 0: return true
            case pid:
                status = Subprocess.exitStatus(raw)
                watchdog.dismiss()
                return false
            default: return false // reaped by `waitUntilExit` on another thread
            }
        }
    }

    /// Asks it to stop (SIGTERM: a graceful shutdown), unless it has been reaped.
    public func terminate() {
        reaped.withLock { status in
            if status == nil { _ = kill(pid, SIGTERM) }
        }
    }

    /// Blocks until it exits, and reaps it: for a thread of its own (`runBlocking`).
    /// - Returns: its exit status (`Subprocess.exitStatus`).
    @discardableResult
    public func waitUntilExit() -> Int32 {
        if let status = reaped.withLock({ $0 }) { return status }
        let status = Subprocess.waitForExit(pid)
        return reaped.withLock { kept in
            if status >= 0 {
                kept = status
                watchdog.dismiss()
            }
            return kept ?? status
        }
    }
}
