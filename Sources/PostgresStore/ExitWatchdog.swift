import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Cleans up after this process when it ends, however it ends: a Ctrl-C, a CI job's kill,
/// a crash, for which no exit handler runs. A test run's cluster left behind was a
/// PostgreSQL server still running and 3.4 GB of /dev/shm; a `smart-bff` it started was a
/// server still holding its port.
///
/// The watchdog is a shell in a session of its own, ignoring terminal signals, that reads a
/// pipe whose writing end only this process holds (close-on-exec). When the pipe ends, it
/// runs its script. `dismiss()`, once the thing watched is cleaned up in order, ends the
/// pipe too: the script must then find nothing left to do.
public final class ExitWatchdog: Sendable {
    private let pid: Int32
    private let pipeEnd: Int32

    /// Starts a watchdog that runs `script` (POSIX shell, `arguments` as `$0`, `$1`, …) once
    /// this process has ended or `dismiss()` is called.
    public init(script: String, arguments: [String]) throws {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw Subprocess.Failure(description: "pipe: \(String(cString: strerror(errno)))") }
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC) // the read end is closed below
        defer { close(ends[0]) }
        do {
            pid = try Subprocess.spawn("/bin/sh", ["-c", "trap '' HUP INT TERM QUIT; cat > /dev/null; " + script] + arguments,
                                       input: ends[0], outputPath: "/dev/null", newSession: true)
        } catch {
            close(ends[1])
            throw error
        }
        pipeEnd = ends[1]
    }

    /// Ends the watch: the script runs now (finding nothing to do), and the shell is reaped.
    public func dismiss() {
        close(pipeEnd)
        _ = Subprocess.waitForExit(pid)
    }
}
