import BFFTesting
import Foundation
import PostgresStore
import Synchronization
import Testing

/// Each test here stops or restarts a cluster of its own, so the shared one is not disturbed.
@Suite("database outages")
struct OutageTests {
    /// A connect to a server that is down is refused at once (its socket file is gone), so
    /// the connect timeout only ever ends connects to a server that is up but slow: right after
    /// a restart or resume, on a loaded machine, that took longer than a few seconds.
    func makePool(_ cluster: PostgresCluster, connectTimeoutSeconds: Int = 30) -> ConnectionPool {
        var configuration = ConnectionPool.Configuration()
        configuration.size = 4
        configuration.connectTimeoutSeconds = connectTimeoutSeconds
        configuration.acquireTimeout = .seconds(2)
        return ConnectionPool(url: cluster.url(), configuration: configuration)
    }

    @Test("server restarted under load: no hang, no crash, failures are clear connection errors, then recovery without a new pool")
    func restartUnderLoad() async throws {
        let cluster = try await PostgresCluster.start()
        let pool = makePool(cluster)
        defer { pool.close() }
        try await pool.query("CREATE TABLE t (n integer)")
        let stop = StopFlag()
        let succeeded = Counter() // statements the load workers got through
        let load = Task {
            try await withThrowingTaskGroup(of: (ok: Int, failed: Int, slowest: Duration).self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var ok = 0, failed = 0, slowest = Duration.zero
                        while !stop.isSet {
                            let started = ContinuousClock.now
                            do {
                                try await pool.query("INSERT INTO t VALUES (\(worker))")
                                ok += 1
                                succeeded.increment()
                            } catch let error as PostgresError {
                                #expect(error.isConnectionFailure || error.isPoolTimeout, "unexpected: \(String(reflecting: error))")
                                failed += 1
                                try await Task.sleep(for: .milliseconds(20))
                            }
                            slowest = max(slowest, ContinuousClock.now - started)
                        }
                        return (ok, failed, slowest)
                    }
                }
                return try await group.reduce(into: (ok: 0, failed: 0, slowest: Duration.zero)) {
                    $0 = ($0.ok + $1.ok, $0.failed + $1.failed, max($0.slowest, $1.slowest))
                }
            }
        }
        // The load is under way before the restart, however late its tasks start.
        let deadline = ContinuousClock.now + .seconds(60) // no-hang limit
        while succeeded.current < 8 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try await cluster.restart()
        try await Task.sleep(for: .milliseconds(300))
        stop.set()
        let result = try await load.value
        #expect(result.ok > 0)
        // Every call, failed or not, came back: nothing hangs. A call can legitimately take
        // the 2 s acquire wait plus a 30 s connect timeout; the rest is room for the workers'
        // tasks to resume late on a loaded 2-core machine.
        #expect(result.slowest < .seconds(60))
        #expect(try await pool.query("SELECT count(*) FROM t")[0].int(0) > 0)
        await cluster.stop()
    }

    @Test("after a restart the very next query succeeds: dead idle connections are dropped at checkout")
    func idleConnectionsAfterRestart() async throws {
        let cluster = try await PostgresCluster.start()
        let pool = makePool(cluster)
        defer { pool.close() }
        // Open four connections, all idle afterwards.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 { group.addTask { try await pool.query("SELECT pg_sleep(0.05)") } }
            try await group.waitForAll()
        }
        try await cluster.restart()
        for i in 0..<6 { #expect(try await pool.query("SELECT \(i)::int")[0].int(0) == i) }
        await cluster.stop()
    }

    @Test("server down: every call fails fast with a connection error; back up: the same pool works")
    func outage() async throws {
        let cluster = try await PostgresCluster.start()
        // A connect timeout far beyond the bound below: a call that waited for it instead of
        // being refused at once fails the bound, which is timed on this task and so leaves
        // room for a loaded machine. (Also the connect right after the resume gets 90 s.)
        let pool = makePool(cluster, connectTimeoutSeconds: 90)
        defer { pool.close() }
        #expect(try await pool.query("SELECT 1").count == 1)
        try await cluster.pause()
        for _ in 0..<5 {
            let started = ContinuousClock.now
            await #expect { try await pool.query("SELECT 1") } throws: { error in
                guard let error = error as? PostgresError else { return false }
                return error.isConnectionFailure && error.description.contains("connection failed")
            }
            let took = ContinuousClock.now - started
            #expect(took < .seconds(60), "fails fast: refused, not timed out")
            if took >= .seconds(60) { break } // one is enough; five would take minutes
        }
        try await cluster.resume()
        #expect(try await pool.query("SELECT 2")[0].int(0) == 2)
        await cluster.stop()
    }
}

/// A flag the load workers poll.
final class StopFlag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}
