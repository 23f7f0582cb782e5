@testable import BFF
import BFFTesting
import Foundation
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

    @Test("a read-only database (a standby, a failover under way) makes writes 503 database-unavailable, not 500; the session is kept and works once the database takes writes again")
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

        try await PostgresStoreAdmin.setting(h.database.url, "default_transaction_read_only", to: "off")
        try await PostgresStoreAdmin.takeAway(h.database.url)
        try await PostgresStoreAdmin.bringBack(h.database.url)
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 200, "the session was kept")
        #expect(try await browser.api("POST", h.baseURL + "/logout", launch: launch).status == 204)
    }
}
