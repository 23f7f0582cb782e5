import Cryptography
import Foundation
import PostgresStore
import Synchronization

/// A throwaway PostgreSQL 15 cluster for tests: `initdb` and `pg_ctl` from
/// `/usr/lib/postgresql/15/bin` (run as the `postgres` user when the tests run as root), data
/// and Unix socket in a fresh temporary folder, `listen_addresses=''`, `fsync=off`, a random
/// port number for the socket name.
///
/// `shared()` starts one cluster per test process on first use; each test takes its own
/// database from it with `createDatabase()`. Tests that stop or restart the server use a
/// cluster of their own from `start()`. Every cluster is stopped (`pg_ctl stop -m immediate`)
/// and its folder deleted at process exit, or earlier by `stop()`.
public final class PostgresCluster: Sendable {
    private let server: EmbeddedPostgres

    private init(server: EmbeddedPostgres) { self.server = server }

    /// The cluster shared by all tests of this process.
    public static func shared() async throws -> PostgresCluster {
        let task = registry.withLock { r in
            if let task = r.shared { return task }
            let task = Task<PostgresCluster, any Error> { try await PostgresCluster.start() }
            r.shared = task
            return task
        }
        return try await task.value
    }

    /// A new cluster of the caller's own (for outage and restart tests).
    public static func start() async throws -> PostgresCluster {
        // Every suite runs at once, each with its own pools: a full run of 683 tests had 475
        // server processes at its busiest, and failed now and then against 500 (a test's new
        // connection refused: "connection failed"), as one of 670 had against 200 at 180.
        let server = try await runDetached {
            try EmbeddedPostgres.start(prefix: "smart-bff-test-pg", maxConnections: 1_000, in: memoryBackedFolder ?? URL(fileURLWithPath: NSTemporaryDirectory()))
        }
        registry.withLock { r in
            r.started.append(server)
            if !r.exitHandlerInstalled {
                r.exitHandlerInstalled = true
                // While the clusters are removed at exit, which takes a while, threads still at
                // work must find OpenSSL whole: without this, test processes crashed at exit now
                // and then (SIGSEGV in pthread_rwlock_wrlock). OpenSSL frees nothing at exit if
                // this is its first use; else its handler, registered at its first use, runs
                // after this one (handlers run last registered first).
                OpenSSLLifetime.keepThroughExit()
                atexit { PostgresCluster.destroyAll() }
            }
        }
        return PostgresCluster(server: server)
    }

    /// The server's log file.
    public var logFile: String { server.logFile }

    /// The folder holding the server's Unix socket.
    public var socketDirectory: String { server.socketDirectory }
    /// The port number (part of the socket's file name; nothing listens on TCP).
    public var port: Int { server.port }

    /// A libpq URI for `database`: `postgresql:///DB?host=/tmp/…&port=N&user=postgres`.
    public func url(database: String = "postgres") -> String { server.url(database: database) }

    /// Creates a fresh database and returns its URI, so tests are isolated: empty, or a copy
    /// of `template` (a database of this cluster no one is connected to).
    /// - Parameter name: lower-case letters, digits and `_` (a random name when nil).
    public func createDatabase(name: String? = nil, template: String? = nil) async throws -> String {
        let name = name ?? "t_" + Identifierish.random()
        for name in [name] + (template.map { [$0] } ?? []) {
            guard name.utf8.count <= 63, name.first.map({ $0.isLetter || $0 == "_" }) == true,
                  name.allSatisfy({ ($0.isASCII && $0.isLowercase) || $0.isNumber || $0 == "_" }) else {
                throw ClusterError(message: "database names here are [a-z_][a-z0-9_]*: \(name)")
            }
        }
        var configuration = ConnectionPool.Configuration()
        configuration.size = 1
        // Generous, as in TestDatabase: at the busiest moments of a parallel run on a slow
        // machine, connecting took longer than the 3 s default.
        configuration.connectTimeoutSeconds = 30
        configuration.acquireTimeout = .seconds(30)
        let pool = ConnectionPool(url: url(), configuration: configuration)
        defer { pool.close() }
        // An identifier cannot be a bound parameter; the names were checked above.
        try await pool.query("CREATE DATABASE \(raw: name)\(raw: template.map { " TEMPLATE " + $0 } ?? "")")
        return url(database: name)
    }

    /// Restarts the server (`pg_ctl restart -m fast`): every open connection breaks.
    public func restart() async throws { try await runDetached { [server] in try server.restart() } }

    /// Stops the server but keeps its data (an outage); `resume()` starts it again.
    public func pause() async throws { try await runDetached { [server] in try server.stopServer() } }

    /// Starts the server again after `pause()`.
    public func resume() async throws { try await runDetached { [server] in try server.startServer() } }

    /// Stops the server at once and deletes its folder (the shared cluster is left alone
    /// until exit).
    public func stop() async {
        if let shared = Self.registry.withLock({ $0.shared }), let cluster = try? await shared.value, cluster === self { return }
        // Destroyed before it leaves the registry: a process that exits meanwhile (a stop
        // begun in a test's last moments) still removes it at exit. (Destroying twice is harmless.)
        _ = try? await runDetached { [server] in server.destroy() }
        Self.registry.withLock { r in r.started.removeAll { $0 === server } }
    }

    /// `/dev/shm` when it is a writable folder with 4 GiB free: a test run creates and copies
    /// hundreds of databases, and on a disk file system the kernel's work for their files was
    /// most of PostgreSQL's CPU time in a run (the data is thrown away, and `fsync` is off).
    private static var memoryBackedFolder: URL? {
        var stats = statvfs()
        guard access("/dev/shm", W_OK) == 0, statvfs("/dev/shm", &stats) == 0,
              UInt64(stats.f_bavail) * UInt64(stats.f_frsize) >= 4 << 30 else { return nil }
        return URL(fileURLWithPath: "/dev/shm")
    }

    // MARK: Process-wide registry (the one global: clusters to clean up at exit)

    private struct Registry {
        var shared: Task<PostgresCluster, any Error>?
        var started: [EmbeddedPostgres] = []
        var exitHandlerInstalled = false
    }

    private static let registry = Mutex(Registry())

    private static func destroyAll() {
        for server in registry.withLock({ $0.started }) { server.destroy() }
    }
}

/// A failure setting up the test cluster.
public struct ClusterError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

enum Identifierish {
    /// 12 random lower-case hex characters, for database names.
    static func random() -> String {
        String(UUID().uuidString.lowercased().filter { $0 != "-" }.prefix(12))
    }
}
