@testable import BFF
import BFFTesting
import Foundation
import JSON
import PostgresStore
import Testing

/// A database that answers, but cannot serve: locked tables, a read-only server. Front ends
/// get a prompt 503 that keeps the session, never a hang or a bare 500.
@Suite("database trouble short of an outage")
struct DatabaseTroubleTests {
    @Test("a lock held on the sessions table (a DBA's LOCK TABLE, a migration's ALTER TABLE) makes session reads 503 database-unavailable within seconds, not as long as the lock is held; they succeed once it is gone")
    func lockedSessionsTable() async throws {
        let h = try await BFFHarness.start(proxyCacheSeconds: 0)
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        let lock = try await TableLock.take(h.database.url, table: "sessions") // held up to 120 s
        for path in ["/session", "/fhir/Patient/pat-1"] {
            let started = ContinuousClock.now
            let page = try await browser.api(h.baseURL + path, launch: launch)
            #expect(page.status == 503 && page.text.contains("database-unavailable"), "\(path): \(page.status) \(page.text)")
            // 5 s lock_timeout; the rest is room for a loaded machine, far below the lock's 120 s.
            #expect(ContinuousClock.now - started < .seconds(60), "\(path) waited for the lock")
        }
        try await lock.release()
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 200)
    }

    @Test("/metrics answers while the sessions count cannot be had (a lock, a stalled server), with the last count: a scrape during an incident keeps its database metrics")
    func metricsWhileTheSessionsTableIsLocked() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        _ = try await h.standaloneLogin(browser)
        #expect(try await browser.metricsWithSessionCount(h.baseURL).contains("bff_active_sessions 1"))
        let lock = try await TableLock.take(h.database.url, table: "sessions") // held up to 120 s
        try await Task.sleep(for: .seconds(5.5)) // the count kept for 5 s has aged: the next scrape asks again
        let metrics = try await browser.request(h.baseURL + "/metrics")
        // The count waits for the lock (5 s lock_timeout, then no count at all); the scrape does not.
        #expect(metrics.status == 200 && metrics.text.contains("bff_active_sessions 1"), "\(metrics.text)")
        #expect(metrics.text.contains("bff_audit_pending_entries"), "\(metrics.text)")
        try await lock.release()
    }

    @Test("with the database away, each sweep says once that it failed, with the reason, not once per step")
    func sweepFailureReportedOnce() async throws {
        let h = try await BFFHarness.start(sweepInterval: .milliseconds(300))
        defer { Task { await h.stop() } }
        try await PostgresStoreAdmin.takeAway(h.database.url)
        let lines = { h.logs.captured.filter { $0.contains("sweep failed") } }
        let deadline = ContinuousClock.now + .seconds(30) // a no-hang limit for a loaded machine
        while lines().count < 3 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        try await PostgresStoreAdmin.bringBack(h.database.url)
        let failed = lines()
        #expect(failed.count >= 3)
        #expect(failed.allSatisfy { $0.contains("connection failed: ") }, "no reason given: \(failed)")
        // A sweep's steps fail within a millisecond of each other; sweeps are 300 ms apart.
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let times = failed.compactMap { line in
            (try? JSONParser.parse(Array(line.utf8)))?["ts"]?.stringValue.flatMap { formatter.date(from: $0) }
        }
        #expect(times.count == failed.count)
        let gaps = zip(times.dropFirst(), times).map { $0.timeIntervalSince($1) }
        #expect(gaps.allSatisfy { $0 > 0.15 }, "two lines for one sweep: gaps \(gaps)")
    }

    @Test("a read-only database (a standby, a failover under way) makes writes 503 database-unavailable, not 500, and /readyz 503 read-only; the connections that met it are dropped, so writes work again once new connections take them, the session kept")
    func readOnlyDatabase() async throws {
        let h = try await BFFHarness.start(proxyCacheSeconds: 0)
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        try await PostgresStoreAdmin.setting(h.database.url, "default_transaction_read_only", to: "on")
        try await PostgresStoreAdmin.takeAway(h.database.url) // the pool's connections reopen read-only
        try await PostgresStoreAdmin.bringBack(h.database.url)
        let refused = try await browser.api("POST", h.baseURL + "/logout", launch: launch)
        #expect(refused.status == 503 && refused.text.contains("database-unavailable"), "\(refused.status) \(refused.text)")
        let login = try await browser.request(h.baseURL + "/login")
        #expect(login.status == 503 && login.text.contains("database-unavailable"), "\(login.status) \(login.text)")
        let ready = try await browser.request(h.baseURL + "/readyz")
        #expect(ready.status == 503 && ready.text.contains("\"database\":\"read-only\""), "\(ready.status) \(ready.text)")

        // Writable again for new connections only (as after a failover, where the host name
        // moved to the new primary): the pool's old connections must go.
        try await PostgresStoreAdmin.setting(h.database.url, "default_transaction_read_only", to: "off")
        // Readiness alone (an instance out of service gets no requests) finds its way to a
        // connection that takes writes: each check that meets a read-only one drops it.
        var readyAgain = 0
        for _ in 0..<30 where readyAgain != 200 {
            readyAgain = try await browser.request(h.baseURL + "/readyz").status
            if readyAgain != 200 { try await Task.sleep(for: .milliseconds(1100)) } // one check a second
        }
        #expect(readyAgain == 200, "/readyz kept meeting read-only connections")
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 200, "the session was kept")
        var status = 0
        for _ in 0..<20 where status != 204 {
            status = try await browser.api("POST", h.baseURL + "/logout", launch: launch).status
        }
        #expect(status == 204, "writes kept failing on the pool's read-only connections")
    }
}
