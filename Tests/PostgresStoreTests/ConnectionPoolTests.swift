import BFFTesting
import Foundation
import PostgresStore
import Testing

@Suite("ConnectionPool")
struct ConnectionPoolTests {
    func pool(size: Int, acquireTimeout: Duration = .seconds(30)) async throws -> ConnectionPool {
        var configuration = ConnectionPool.Configuration()
        configuration.size = size
        configuration.acquireTimeout = acquireTimeout
        return ConnectionPool(url: try await PostgresCluster.shared().createDatabaseForLoad(), configuration: configuration)
    }

    /// The URL of `url`'s database for a new role allowed `connections` connections (the
    /// cluster's max_connections is shared by every test), and a pool of `size` on it that
    /// waits up to `acquireTimeout`.
    func limitedRole(to connections: Int, on url: String, size: Int = 4,
                     acquireTimeout: Duration = .seconds(60)) async throws -> (url: String, pool: ConnectionPool) {
        let admin = ConnectionPool(url: url)
        defer { admin.close() }
        let role = "limited_\(UInt32.random(in: 0...UInt32.max))"
        try await admin.query("CREATE ROLE \(raw: role) LOGIN CONNECTION LIMIT \(raw: String(connections))")
        let limitedURL = url.replacingOccurrences(of: "user=postgres", with: "user=" + role)
        #expect(limitedURL != url)
        var configuration = ConnectionPool.Configuration()
        configuration.size = size
        configuration.acquireTimeout = acquireTimeout
        return (limitedURL, ConnectionPool(url: limitedURL, configuration: configuration))
    }

    @Test("acquiring from an exhausted pool times out with a clear error, and the pool works afterwards")
    func acquireTimeout() async throws {
        let pool = try await pool(size: 1, acquireTimeout: .milliseconds(200))
        defer { pool.close() }
        let waited = try await pool.withConnection { _ in
            let started = ContinuousClock.now
            await #expect { try await pool.query("SELECT 1") } throws: { ($0 as? PostgresError)?.isPoolTimeout == true }
            return ContinuousClock.now - started
        }
        // 200 ms configured; the upper bound only says "no hang": it is timed on this task,
        // which a loaded 2-core machine can keep from resuming for 20 s.
        #expect(waited >= .milliseconds(200) && waited < .seconds(60))
        #expect(try await pool.query("SELECT 41 + 1").first?.int(0) == 42)
    }

    @Test("a cancelled wait for a connection ends at once")
    func cancelledWait() async throws {
        // An acquire timeout far beyond the bound below, which is timed on this task and so
        // leaves room for a loaded machine: a cancellation that did not end the wait fails it.
        let pool = try await pool(size: 1, acquireTimeout: .seconds(120))
        defer { pool.close() }
        try await pool.withConnection { _ in
            let waiter = Task { try await pool.query("SELECT 1") }
            try await Task.sleep(for: .milliseconds(100))
            let started = ContinuousClock.now
            waiter.cancel()
            await #expect(throws: CancellationError.self) { try await waiter.value }
            #expect(ContinuousClock.now - started < .seconds(60)) // far below the 120 s acquire timeout
        }
        #expect(try await pool.query("SELECT 1").count == 1)
    }

    @Test("a new connection the server refuses (its connection limit taken) waits for one of the pool's own working connections to come free; with none working, the refusal fails at once")
    func refusedConnectWaitsForOneThatWorks() async throws {
        let (limitedURL, pool) = try await limitedRole(to: 1, on: try await PostgresCluster.shared().createDatabaseForLoad())
        defer { pool.close() }

        let holding = Counter(), release = Counter()
        let holder = Task {
            try await pool.withConnection { connection in
                _ = try await connection.query("SELECT 1")
                holding.increment()
                while release.current == 0 { try await Task.sleep(for: .milliseconds(10)) }
            }
        }
        while holding.current == 0 { try await Task.sleep(for: .milliseconds(10)) }
        let second = Task { try await pool.query("SELECT 2") }
        try await Task.sleep(for: .seconds(2)) // its connect is refused within milliseconds
        release.increment()
        #expect(try await second.value.first?.int(0) == 2, "refused instead of waiting for the pool's working connection")
        try await holder.value

        // Another pool holds the role's one connection: this one has none working, so the
        // refusal is the answer, at once (as while the server is down).
        let other = ConnectionPool(url: limitedURL, configuration: pool.configuration)
        defer { other.close() }
        let started = ContinuousClock.now
        await #expect { try await other.query("SELECT 3") } throws: { ($0 as? PostgresError)?.isConnectionFailure == true }
        #expect(ContinuousClock.now - started < .seconds(30), "waited for the acquire timeout (60 s)")
    }

    @Test("callers refused a connection (the server's limit taken by others) all get one of the pool's working connections as it comes free, none waits out its timeout beside an idle one")
    func refusedCallersShareTheWorkingConnection() async throws {
        let (limitedURL, pool) = try await limitedRole(to: 2, on: try await PostgresCluster.shared().createDatabaseForLoad(),
                                                       acquireTimeout: .seconds(20))
        defer { pool.close() }
        // Another client holds one of the role's two connections.
        let other = ConnectionPool(url: limitedURL)
        defer { other.close() }
        try await other.query("SELECT 1")
        try await pool.query("SELECT 1") // the role's second connection, now the pool's (a pool in service)
        // Two at once: one takes the idle connection and gives it back within a millisecond;
        // the other finds the pool not full, connects, is refused (which takes the server a
        // process), and must then take the connection now idle, not wait beside it for a
        // release that has already happened.
        for round in 0..<3 {
            let started = ContinuousClock.now
            async let first = pool.query("SELECT 1")
            async let second = pool.query("SELECT 2")
            #expect(try await (first.first?.int(0), second.first?.int(0)) == (1, 2), "round \(round)")
            #expect(ContinuousClock.now - started < .seconds(15), "round \(round) waited for the 20 s acquire timeout")
        }
    }

    @Test("callers refused a connection while the pool's working one is busy wait for it: they do not pass their slots on, each to be refused in turn (each refusal costs the server a process)")
    func refusedCallersDoNotStorm() async throws {
        let cluster = try await PostgresCluster.start() // its own log, to count refusals in
        defer { Task { await cluster.stop() } }
        let (limitedURL, pool) = try await limitedRole(to: 2, on: try await cluster.createDatabase())
        defer { pool.close() }
        let other = ConnectionPool(url: limitedURL)
        defer { other.close() }
        try await other.query("SELECT 1") // another client holds one of the role's two
        let holding = Counter(), release = Counter()
        let holder = Task {
            try await pool.withConnection { connection in // the pool's one working connection, busy for 3 s
                _ = try await connection.query("SELECT 1")
                holding.increment()
                let until = ContinuousClock.now + .seconds(3)
                while release.current == 0 && ContinuousClock.now < until { try await Task.sleep(for: .milliseconds(10)) }
            }
        }
        while holding.current == 0 { try await Task.sleep(for: .milliseconds(10)) }
        let answered = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<8 { group.addTask { try await pool.query("SELECT \(i)::int").first?.int(0) ?? -1 } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        try await holder.value
        #expect(answered.sorted() == Array(0..<8))
        let refusals = try String(contentsOfFile: cluster.logFile, encoding: .utf8).components(separatedBy: "too many connections for role").count - 1
        // The pool's three free slots are tried once each (a few more if a caller is refused
        // twice); passed from waiter to waiter, they were tried hundreds of times in 3 s.
        #expect(refusals >= 1 && refusals <= 12, "\(refusals) connections refused")
    }

    @Test("never more connections than its size, however many callers")
    func bounded() async throws {
        let pool = try await pool(size: 3)
        defer { pool.close() }
        let peak = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    try await pool.query("SELECT pg_sleep(0.01)")
                    return pool.usage.open
                }
            }
            return try await group.reduce(0) { max($0, $1) }
        }
        #expect(peak <= 3)
        let backends = try await pool.query("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        #expect(try backends[0].int(0) <= 3)
    }

    @Test("a connection killed by the server is replaced before anyone notices")
    func terminatedBackend() async throws {
        let pool = try await pool(size: 1)
        defer { pool.close() }
        let pid = try await pool.query("SELECT pg_backend_pid()")[0].int(0)
        let admin = ConnectionPool(url: try await PostgresCluster.shared().url() + "&connect_timeout=30")
        defer { admin.close() }
        // With a timeout, pg_terminate_backend returns once the backend has exited (true), so
        // its connection is closed before the next checkout, however slow the machine.
        #expect(try await admin.query("SELECT pg_terminate_backend(\(pid), 30000)")[0].bool(0))
        let newPID = try await pool.query("SELECT pg_backend_pid()")[0].int(0)
        #expect(newPID != pid)
    }

    @Test("a connection given back inside a transaction is not lent out in that state")
    func leftInTransaction() async throws {
        struct Oops: Error {}
        let pool = try await pool(size: 1)
        defer { pool.close() }
        try await pool.query("CREATE TABLE t (n integer)")
        await #expect(throws: Oops.self) {
            try await pool.withConnection { c in
                try await c.run { try $0.executeScript("BEGIN; INSERT INTO t VALUES (1)") }
                throw Oops()
            }
        }
        // Reused as it was, the connection would still hold the insert's transaction id.
        #expect(try await pool.query("SELECT txid_current_if_assigned() IS NULL")[0].bool(0))
        #expect(try await pool.query("SELECT count(*) FROM t")[0].int(0) == 0)
    }

    @Test("withTransaction commits on return and rolls back on throw")
    func transactions() async throws {
        struct Oops: Error {}
        let pool = try await pool(size: 2)
        defer { pool.close() }
        try await pool.query("CREATE TABLE t (n integer)")
        try await pool.withTransaction { c in try await c.query("INSERT INTO t VALUES (\(1))") }
        await #expect(throws: Oops.self) {
            try await pool.withTransaction { c in
                try await c.query("INSERT INTO t VALUES (\(2))")
                throw Oops()
            }
        }
        #expect(try await pool.query("SELECT n FROM t").map { try $0.int(0) } == [1])
    }

    @Test("withTransaction's limits hold from its first moment: a server's short idle_in_transaction_session_timeout does not end a transaction that sets a longer one")
    func transactionLimitsFromTheStart() async throws {
        let url = try await PostgresCluster.shared().createDatabaseForLoad()
        let setup = ConnectionPool(url: url)
        let name = try await setup.query("SELECT current_database()")[0].string(0)
        try await setup.query("ALTER DATABASE \(raw: "\"" + name + "\"") SET idle_in_transaction_session_timeout = '100ms'")
        setup.close()
        let pool = ConnectionPool(url: url) // its connections have the setting
        defer { pool.close() }
        // Idle 300 ms inside the transaction, as a refresh does while the EHR answers.
        let value = try await pool.withTransaction(limits: "SET LOCAL idle_in_transaction_session_timeout = '10s'") { c in
            try await Task.sleep(for: .milliseconds(300))
            return try await c.query("SELECT 1")[0].int(0)
        }
        #expect(value == 1)
        // Without them, the server's limit ends the session: the setting is in force.
        await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { c in
                try await Task.sleep(for: .milliseconds(300))
                _ = try await c.query("SELECT 1")
            }
        }
    }

    @Test("a closed pool refuses work with a connection failure")
    func closed() async throws {
        let pool = try await pool(size: 1)
        pool.close()
        await #expect { try await pool.query("SELECT 1") } throws: { ($0 as? PostgresError)?.isConnectionFailure == true }
    }
}
