import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Cleans up after this process when it ends, however it ends: a Ctrl-C, a CI job's kill,
/// a crash, for which no exit handler runs. A test run's cluster left behind was a
/// PostgreSQL server still running and 3.4 GB of /dev/shm; a `smart-bff` it started was a
/// server still holding its port.
///
/// The watchdog is a shell in a session of its own, ignoring terminal signals, whose
/// standard input is one end of a socket pair whose other end only this process holds
/// (close-on-exec from its creation). When its input ends with nothing written, this process
/// is gone: it runs its script. `dismiss()`, once the thing watched is cleaned up in order,
/// writes a line first: the shell then exits without running the script. (A socket, not a
/// pipe: a write to a shell already gone fails, where a pipe's would raise SIGPIPE.)
public final class ExitWatchdog: Sendable {
    private let pid: Int32
    private let ownEnd: Int32

    /// Starts a watchdog that runs `script` (POSIX shell, `arguments` as `$0`, `$1`, …) once
    /// this process has ended, unless `dismiss()` was called.
    public init(script: String, arguments: [String]) throws {
        var ends: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw Subprocess.Failure(description: "socketpair: \(String(cString: strerror(errno)))")
        }
        defer { close(ends[0]) } // the child's copy is its standard input
        do {
            pid = try Subprocess.spawn("/bin/sh", ["-c", "trap '' HUP INT TERM QUIT; if read -r _; then exit 0; fi; " + script] + arguments,
                                       input: ends[0], outputPath: "/dev/null", newSession: true)
        } catch {
            close(ends[1])
            throw error
        }
        ownEnd = ends[1]
    }

    /// Ends the watch without running the script, and reaps the shell.
    public func dismiss() {
        var newline = UInt8(ascii: "\n")
        _ = send(ownEnd, &newline, 1, Int32(MSG_NOSIGNAL))
        close(ownEnd)
        _ = Subprocess.waitForExit(pid)
    }
}
