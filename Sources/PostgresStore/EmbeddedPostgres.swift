import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A private PostgreSQL 15 cluster in a folder of its own: initdb and pg_ctl from
/// `/usr/lib/postgresql/15/bin`, listening only on a Unix socket in that folder, run as
/// the `postgres` user when we are root. Used by `smart-bff demo` and the tests.
public final class EmbeddedPostgres: Sendable {
    public let directory: URL
    public let port: Int
    /// PostgreSQL's `max_connections`.
    public let maxConnections: Int
    public static let binaries = EnvironmentValue.named("BFF_PG_BIN") ?? "/usr/lib/postgresql/15/bin"
    /// Held while the cluster is destroyed; true once it is.
    private let destroyed = Mutex(false)
    /// Removes the cluster should this process end without `destroy()`.
    private let watchdog: ExitWatchdog

    /// The watchdog's work, with the cluster's folder as `$0`: stop the server if the process
    /// `postmaster.pid` names is this cluster's postmaster (its working directory, which
    /// PostgreSQL sets to its data directory, is this one's, whatever spelling of the path),
    /// with SIGQUIT (PostgreSQL's immediate shutdown); wait for it to exit (at most 30 s);
    /// delete the folder, again until it stays gone for a second (at most 30 times): an
    /// `initdb` of the process killed in its start goes on for a moment and writes there.
    private static let cleanup = """
        data="$0/data"
        pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null)
        case "$pid" in ''|*[!0-9]*) pid= ;; esac
        if [ -n "$pid" ] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$(cd "$data" 2>/dev/null && pwd -P)" ]; then
          kill -QUIT "$pid"
          i=0
          while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
        fi
        n=0
        while [ $n -lt 30 ]; do rm -rf -- "$0"; sleep 1; [ -e "$0" ] || break; n=$((n + 1)); done
        """

    public var socketDirectory: String { directory.appendingPathComponent("socket").path }
    var dataDirectory: String { directory.appendingPathComponent("data").path }
    public var logFile: String { directory.appendingPathComponent("postgres.log").path }

    /// Creates and starts a cluster in a new folder in `parent` (the temporary folder).
    public static func start(prefix: String = "smart-bff-pg", maxConnections: Int = 200,
                             in parent: URL = URL(fileURLWithPath: NSTemporaryDirectory())) throws -> EmbeddedPostgres {
        let directory = parent.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
        // Its owner's alone: trust authentication lets whoever reaches the socket in as
        // the superuser, so no other local user may reach it (folder and socket 0700).
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let watchdog: ExitWatchdog
        do {
            watchdog = try ExitWatchdog(script: cleanup, arguments: [directory.path])
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        let cluster = EmbeddedPostgres(directory: directory, port: Int.random(in: 20_000...60_000), maxConnections: maxConnections,
                                       watchdog: watchdog)
        do {
            try FileManager.default.createDirectory(atPath: cluster.socketDirectory, withIntermediateDirectories: false,
                                                    attributes: [.posixPermissions: 0o700])
            if getuid() == 0 { try Subprocess.run("/bin/chown", ["-R", "postgres", directory.path], newSession: true) }
            try cluster.run("initdb", ["-D", cluster.dataDirectory, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"])
            try cluster.startServer()
        } catch {
            cluster.destroy()
            throw error
        }
        return cluster
    }

    private init(directory: URL, port: Int, maxConnections: Int, watchdog: ExitWatchdog) {
        self.directory = directory
        self.port = port
        self.maxConnections = maxConnections
        self.watchdog = watchdog
    }

    private var serverOptions: String {
        "-k \(socketDirectory) -p \(port) -c listen_addresses='' -c unix_socket_permissions=0700 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=\(maxConnections)"
    }

    /// A libpq URI for database `database`.
    public func url(database: String = "postgres") -> String {
        "postgresql:///\(database)?host=\(socketDirectory)&port=\(port)&user=postgres"
    }

    public func startServer() throws {
        try run("pg_ctl", ["-D", dataDirectory, "-l", logFile, "-w", "-t", "30", "-o", serverOptions, "start"])
    }

    public func stopServer() throws { try run("pg_ctl", ["-D", dataDirectory, "-w", "-m", "fast", "stop"]) }

    public func restart() throws {
        try run("pg_ctl", ["-D", dataDirectory, "-w", "-t", "30", "-m", "fast", "-o", serverOptions, "restart"])
    }

    /// Stops the server at once and deletes the folder; once. A second caller (an exit
    /// handler while a test's own stop is under way) waits for the first to finish: run side
    /// by side, one deleted the folder while the other's server was still stopping, and the
    /// folder was left behind.
    public func destroy() {
        destroyed.withLock { done in
            guard !done else { return }
            try? run("pg_ctl", ["-D", dataDirectory, "-m", "immediate", "stop"])
            try? FileManager.default.removeItem(at: directory)
            watchdog.dismiss()
            done = true
        }
    }

    /// Runs a PostgreSQL program in a session of its own: a Ctrl-C at the terminal (SIGINT to
    /// the whole foreground group) reaches the demo, which stops the cluster and deletes it,
    /// and not initdb or the server, which it would kill halfway. Its output goes to a log in
    /// the cluster's folder, deleted with it however the process ends (a killed one's too).
    private func run(_ program: String, _ arguments: [String]) throws {
        let executable = EmbeddedPostgres.binaries + "/" + program
        let log = directory.appendingPathComponent("\(program).log").path
        if getuid() == 0 {
            try Subprocess.run("/usr/sbin/runuser", ["-u", "postgres", "--", executable] + arguments, logPath: log, newSession: true)
        } else {
            try Subprocess.run(executable, arguments, logPath: log, newSession: true)
        }
    }
}
