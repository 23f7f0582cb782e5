import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Removes an embedded cluster when the process that made it ends, however it ends: a
/// Ctrl-C, a CI job's kill, a crash. Exit handlers run for none of these, and a test run's
/// cluster left behind was a PostgreSQL server still running and 3.4 GB of /dev/shm.
///
/// The watchdog is a shell in a session of its own that reads a pipe whose writing end only
/// this process holds (close-on-exec). When the pipe ends, it stops the cluster's server
/// (SIGQUIT, PostgreSQL's immediate shutdown) if the process named in `postmaster.pid` is
/// that server, waits for it to exit, and removes the folder. `dismiss()`, after the
/// cluster's own orderly removal, ends the pipe with nothing left to do.
final class ClusterWatchdog: Sendable {
    private let pid: Int32
    private let pipeEnd: Int32

    /// What the shell runs, with the cluster's folder as `$0`.
    private static let script = """
        trap '' HUP INT TERM QUIT
        cat > /dev/null
        pid=$(head -n 1 "$0/data/postmaster.pid" 2>/dev/null)
        case "$pid" in
          ''|*[!0-9]*) ;;
          *) if tr '\\0' '\\n' < "/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$0/data"; then
               kill -QUIT "$pid"
               while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
             fi ;;
        esac
        rm -rf -- "$0"
        """

    /// Starts watching `directory` (a cluster's folder, with its data in `data/`).
    init(directory: String) throws {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw Subprocess.Failure(description: "pipe: \(String(cString: strerror(errno)))") }
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC) // the read end is closed below
        defer { close(ends[0]) }
        do {
            pid = try Subprocess.spawn("/bin/sh", ["-c", Self.script, directory], input: ends[0], outputPath: "/dev/null", newSession: true)
        } catch {
            close(ends[1])
            throw error
        }
        pipeEnd = ends[1]
    }

    /// The cluster is gone: the watchdog finds nothing to do, and is reaped.
    func dismiss() {
        close(pipeEnd)
        _ = Subprocess.waitForExit(pid)
    }
}
