import Foundation
internal import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program to completion with posix_spawn and waitpid. (Foundation's `Process`
/// left children unreaped here when several tests started programs at once.)
public enum Subprocess {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs `executable` with `arguments`; output goes to `logPath` (or /dev/null).
    /// Throws when the program exits non-zero, with its output.
    public static func run(_ executable: String, _ arguments: [String], logPath: String? = nil) throws {
        let log = logPath ?? NSTemporaryDirectory() + "smart-bff-cmd-\(UUID().uuidString).log"
        defer { if logPath == nil { try? FileManager.default.removeItem(atPath: log) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of ours: a server (PostgreSQL) started while connections are open
        // would otherwise hold any descriptor not marked close-on-exec for its lifetime.
        bff_spawn_close_from(&actions, 3)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard rc == 0 else { throw Failure(description: "cannot start \(executable): \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = (status & 0x7f) == 0
        let code = (status >> 8) & 0xff
        guard exited && code == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw Failure(description: "\(executable) \(arguments.first ?? "") failed (status \(status)): \(text.suffix(2000))")
        }
    }
}

/// Runs blocking work (a subprocess, a blocking wait) on a thread of its own, so that it
/// never holds a thread of the Swift concurrency pool.
public func runDetached<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}
