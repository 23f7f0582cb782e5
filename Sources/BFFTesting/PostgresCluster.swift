import Foundation
import PostgresStore

/// A throwaway PostgreSQL 15 cluster for tests: initdb and pg_ctl from
/// `/usr/lib/postgresql/15/bin`, listening only on a Unix socket in a temporary folder
/// (run as the `postgres` user when the tests run as root). One shared cluster per test
/// process (`shared()`); tests that restart the server start their own (`start()`).
public final class PostgresCluster: Sendable {
    public let directory: URL
    public let port: Int
    public var socketDirectory: String { directory.appendingPathComponent("socket").path }
    private let dataDirectory: URL
    static let binaries = "/usr/lib/postgresql/15/bin"

    /// The cluster shared by the whole test run; stopped when the process exits.
    public static func shared() async throws -> PostgresCluster { try await sharedCluster.value }

    private static let sharedCluster = Task<PostgresCluster, any Error> {
        let cluster = try PostgresCluster.start()
        atexit { PostgresCluster.stopAllAtExit() }
        return cluster
    }

    /// Starts a new cluster (initdb + pg_ctl start).
    public static func start() throws -> PostgresCluster {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("smart-bff-pg-\(UUID().uuidString.prefix(8))")
        let cluster = PostgresCluster(directory: directory, port: Int.random(in: 20_000...60_000))
        try cluster.initialize()
        try cluster.pgctl(["start", "-w", "-t", "30", "-l", directory.appendingPathComponent("log").path, "-o", cluster.serverOptions])
        started.withLock { $0.append(cluster) }
        return cluster
    }

    private init(directory: URL, port: Int) {
        self.directory = directory
        self.port = port
        self.dataDirectory = directory.appendingPathComponent("data")
    }

    private var serverOptions: String {
        "-k \(socketDirectory) -p \(port) -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    }

    private func initialize() throws {
        try FileManager.default.createDirectory(atPath: socketDirectory, withIntermediateDirectories: true)
        if getuid() == 0 { try PostgresCluster.run("/bin/chown", ["-R", "postgres", directory.path]) }
        try PostgresCluster.run(PostgresCluster.binaries + "/initdb", ["-D", dataDirectory.path, "-U", "postgres", "-A", "trust", "--no-sync"], asPostgres: true)
    }

    /// A libpq URI for database `name` on this cluster.
    public func url(database: String = "postgres") -> String {
        "postgresql:///\(database)?host=\(socketDirectory)&port=\(port)&user=postgres"
    }

    /// Creates a fresh empty database and returns its URI; tests that need isolation use one each.
    public func createDatabase(_ name: String = "t_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")) async throws -> String {
        let pool = ConnectionPool(url: url(), configuration: .init())
        defer { pool.close() }
        try await pool.query("CREATE DATABASE \(raw: name)")
        return url(database: name)
    }

    /// `pg_ctl restart` (the database is down for a moment).
    public func restart() throws {
        try pgctl(["restart", "-w", "-t", "30", "-m", "fast", "-o", serverOptions])
    }

    public func stopServer() throws { try pgctl(["stop", "-w", "-m", "fast"]) }
    public func startServer() throws {
        try pgctl(["start", "-w", "-t", "30", "-l", directory.appendingPathComponent("log").path, "-o", serverOptions])
    }

    /// Stops the server and removes its folder.
    public func destroy() {
        try? pgctl(["stop", "-m", "immediate"])
        try? FileManager.default.removeItem(at: directory)
    }

    private func pgctl(_ arguments: [String]) throws {
        try PostgresCluster.run(PostgresCluster.binaries + "/pg_ctl", ["-D", dataDirectory.path] + arguments, asPostgres: true)
    }

    private static let started = LockedArray<PostgresCluster>()

    private static func stopAllAtExit() {
        for cluster in started.withLock({ $0 }) { cluster.destroy() }
    }

    static func run(_ executable: String, _ arguments: [String], asPostgres: Bool = false) throws {
        if asPostgres && getuid() == 0 {
            try Subprocess.run("/usr/sbin/runuser", ["-u", "postgres", "--", executable] + arguments)
        } else {
            try Subprocess.run(executable, arguments)
        }
    }

    struct ClusterError: Error, CustomStringConvertible { let message: String; var description: String { message } }
}

import Synchronization

/// A lock-protected array (test support).
final class LockedArray<Element: Sendable>: Sendable {
    private let storage = Mutex<[Element]>([])
    func withLock<R>(_ body: (inout [Element]) -> R) -> R { storage.withLock { body(&$0) } }
}
