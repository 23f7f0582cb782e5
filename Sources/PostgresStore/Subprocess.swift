import Foundation
internal import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// Starts programs with posix_spawn. (Foundation's `Process` left children unreaped here
/// when several tests started programs at once, and its `run()` reads past a directory entry
/// while it lists /proc/self/fd, which crashes a process with many descriptors open now and
/// then: swift-corelibs-foundation pull request 5472, not in Swift 6.3.1.)
public enum Subprocess {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs `executable` with `arguments`; output goes to `logPath` (or /dev/null); with
    /// `newSession`, in a session of its own (see `spawn`).
    /// Throws when the program exits non-zero, with its output.
    public static func run(_ executable: String, _ arguments: [String], logPath: String? = nil, newSession: Bool = false) throws {
        let log = logPath ?? NSTemporaryDirectory() + "smart-bff-cmd-\(UUID().uuidString).log"
        defer { if logPath == nil { try? FileManager.default.removeItem(atPath: log) } }
        let pid = try spawn(executable, arguments, outputPath: log, newSession: newSession)
        let status = waitForExit(pid)
        guard status == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw Failure(description: "\(executable) \(arguments.first ?? "") failed (exit status \(status)): \(text.suffix(2000))")
        }
    }

    /// Starts `executable` with `arguments`, in `environment` (this process's own when nil):
    /// standard input from descriptor `input` (or /dev/null), standard output appended to
    /// `outputPath`, standard error to `errorPath` (or with the output), and no other
    /// descriptor of ours: a server (PostgreSQL) started while connections are open would
    /// otherwise hold any descriptor not marked close-on-exec for its lifetime. It starts with
    /// no signal blocked and the stop signals and SIGPIPE at their default action (a Dispatch
    /// worker thread blocks them; this process ignores SIGPIPE). With `newSession`, the child
    /// starts a session of its own (no terminal's signals reach it).
    /// The caller reaps the child (`waitForExit`).
    /// - Returns: the child's process id.
    public static func spawn(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                             input: Int32? = nil, outputPath: String, errorPath: String? = nil, newSession: Bool = false) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        bff_spawnattr_set_clean_start(&attributes, newSession ? 1 : 0)
        if let input {
            posix_spawn_file_actions_adddup2(&actions, input, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if let errorPath {
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        bff_spawn_close_from(&actions, 3)
        let argv = CStrings([executable] + arguments)
        let envp = environment.map { CStrings($0.map { "\($0.key)=\($0.value)" }) }
        var pid: pid_t = 0
        let rc = if let envp { posix_spawn(&pid, executable, &actions, &attributes, argv.pointers, envp.pointers) }
                 else { posix_spawn(&pid, executable, &actions, &attributes, argv.pointers, environ) }
        guard rc == 0 else { throw Failure(description: "cannot start \(executable): \(String(cString: strerror(rc)))") }
        return pid
    }

    /// Waits for child `pid` to end and reaps it.
    /// - Returns: its exit status, or 128 plus the signal that ended it (as shells report
    ///   it); -1 when it is not this process's child (already reaped).
    public static func waitForExit(_ pid: Int32) -> Int32 {
        var status: Int32 = 0
        while true {
            if waitpid(pid, &status, 0) == pid { return exitStatus(status) }
            if errno != EINTR { return -1 }
        }
    }

    /// The exit status in waitpid's `status`: its exit code, or 128 plus the ending signal.
    public static func exitStatus(_ status: Int32) -> Int32 {
        (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// NUL-terminated copies of strings, and the NULL-terminated array of them that exec takes.
    private final class CStrings {
        let pointers: [UnsafeMutablePointer<CChar>?]
        init(_ strings: [String]) { pointers = strings.map { strdup($0) } + [nil] }
        deinit { for p in pointers { free(p) } }
    }
}

/// Runs blocking work (a subprocess, a blocking wait) on a thread of its own, so that it
/// never holds a thread of the Swift concurrency pool.
public func runDetached<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}
