import BFF
import BFFTesting
import Foundation
import JSON
import Testing

@Suite("PHI access audit at shutdown")
struct AuditShutdownTests {
    @Test("a stop while the audit table is locked for longer than a write waits (a migration, a failover) retries until the table is free: every entry stored, no loss logged")
    func lockAtShutdownLosesNothing() async throws {
        let h = try await BFFHarness.start() // the default shutdown deadline, 20 s
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        let lock = try await TableLock.take(h.database.url)
        let paths = ["/Patient/pat-1", "/Observation?patient=pat-1", "/Patient/nobody"]
        for path in paths { _ = try await browser.api(h.baseURL + "/fhir" + path, launch: launch) }

        let stopping = Task { await h.bff.shutdown(gracePeriod: .milliseconds(100)) }
        // The write waits for the lock 5 s (the writer's lock_timeout) and fails, during the
        // stop; the lock goes only after that, so a stop that gave up at the first failure
        // would lose the entries.
        let failed = ContinuousClock.now + .seconds(60) // a no-hang limit only
        while !h.logs.captured.contains(where: { $0.contains("audit write failed") }) && ContinuousClock.now < failed {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(h.logs.captured.contains { $0.contains("audit write failed") }, "no write failed while the table was locked")
        try await lock.release()
        #expect(await stopping.value == 0, "a stop that lost nothing is a clean one (serve exits with 0)")

        #expect(!h.logs.captured.contains { $0.contains("audit entries lost at shutdown") }, "\(h.logs.captured.suffix(3))")
        #expect(h.bff.services.audit.status.pending == 0, "\(h.bff.services.audit.status)")
        #expect(try await h.database.store.auditEntries(since: nil).map(\.pathAndQuery) == paths)
    }

    @Test("a stop while the audit table stays locked does not wait for the write under way: it ends past its deadline and logs how many entries are lost")
    func lockPastTheDeadline() async throws {
        // The write waits for the lock far longer (50 s) than the stop may take (0.5 s): a
        // stop that waited for it would log its failure, however slow the machine.
        let h = try await BFFHarness.start(auditLockWait: .seconds(50), shutdownDeadline: .milliseconds(500))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        let lock = try await TableLock.take(h.database.url)
        defer { Task { try await lock.release() } }
        for _ in 0..<3 { #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200) }

        let lostCount = await h.bff.shutdown(gracePeriod: .milliseconds(100))
        #expect(lostCount == 3, "serve exits with 1 when the stop lost entries")
        // The stop's last line says it is over, and what it lost (after the HTTP server's own "stopped").
        let last = h.logs.captured.last ?? ""
        #expect(last.contains("\"shut down\"") && last.contains("\"audit.lost_entries\":\"3\""), "\(last)")

        let lines = h.logs.captured
        let lost = lines.filter { $0.contains("audit entries lost at shutdown") }
        #expect(lost.count == 1, "\(lines.suffix(3))")
        let entries = try JSONParser.parse(Array((lost.first ?? "{}").utf8))["audit.entries"]
        #expect((entries?.stringValue.flatMap(Int.init) ?? entries?.intValue) == 3, "\(lost)")
        // The loss is logged, and the stop over, while the write under way still waits.
        #expect(!lines.contains { $0.contains("audit write failed") }, "the stop waited for the write: \(lines.suffix(3))")
        #expect(try await TableLock.waitingWrites(h.database.url) == 1, "the write under way no longer waits for the lock")
    }

    @Test("a stop while the database is away retries on a short schedule until the deadline, then says how many audit entries it could not write")
    func auditLostAtShutdownIsLogged() async throws {
        // The second read must find the session in the proxy's cache after the database is
        // taken away, however long that takes on a loaded machine.
        let h = try await BFFHarness.start(proxyCacheSeconds: 300, shutdownDeadline: .seconds(3))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        try await PostgresStoreAdmin.takeAway(h.database.url)
        // The session is still in the proxy's cache: the read goes through, its entry cannot be written.
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        let failedBefore = h.bff.services.audit.status.failedWrites
        await h.bff.shutdown(gracePeriod: .milliseconds(100))
        // Retries 0.2 s, 0.4 s, 0.8 s... apart within the 3 s: several (four on a quiet
        // machine; on a loaded one each refused connection takes longer), where a stop that
        // gives up at the first failure makes one.
        #expect(h.bff.services.audit.status.failedWrites - failedBefore >= 2, "\(h.bff.services.audit.status)")
        let lost = h.logs.captured.filter { $0.contains("audit entries lost at shutdown") }
        #expect(lost.count == 1, "\(h.logs.captured.suffix(5))")
        let entries = try JSONParser.parse(Array((lost.first ?? "{}").utf8))["audit.entries"]
        #expect(entries?.stringValue.flatMap(Int.init) ?? entries?.intValue ?? 0 >= 1, "\(lost)")
        try await PostgresStoreAdmin.bringBack(h.database.url)
    }

    @Test("a stop after a write whose commit got no answer, with the database away since: a line of its own says those entries may be stored, and the batch id there says they are")
    func unsettledWriteAtShutdown() async throws {
        let h = try await BFFHarness.start(proxyCacheSeconds: 300, shutdownDeadline: .seconds(2), commitAnswerLoss: (armed: false, awayAfterLoss: true))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        await h.bff.services.audit.flush()
        let relay = try #require(h.commitAnswerLoss)
        relay.arm()
        // From the cache: the read needs no database. Its entry's COPY commits, the answer is
        // lost, and the database is away from then on.
        #expect(try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1", launch: launch).status == 200)
        let lost = ContinuousClock.now + .seconds(60) // a no-hang limit only
        while h.bff.services.audit.status.unsettledEntries == 0 && ContinuousClock.now < lost { try await Task.sleep(for: .milliseconds(20)) }
        #expect(relay.answerLost)
        #expect(try await browser.request(h.baseURL + "/metrics").text.contains("\nbff_audit_unsettled_entries 1\n"))

        await h.bff.shutdown(gracePeriod: .milliseconds(100))

        let lines = h.logs.captured
        #expect(!lines.contains { $0.contains("audit entries lost at shutdown") }, "\(lines.suffix(3))")
        let perhaps = try #require(lines.first { $0.contains("audit entries perhaps lost at shutdown") }, "\(lines.suffix(3))")
        let line = try JSONParser.parse(Array(perhaps.utf8))
        let entries = line["audit.entries"]
        #expect((entries?.stringValue.flatMap(Int.init) ?? entries?.intValue) == 1, "\(perhaps)")
        let batch = try #require(line["audit.batch"]?.stringValue)
        // What an operator checks: the batch is there, so the entry is, once.
        let found = try await h.database.pool.query("SELECT count(*) FROM audit_batches WHERE encode(id, 'hex') = \(batch) AND NOT claimed")[0].int(0)
        #expect(found == 1, "batch \(batch)")
        #expect(try await h.database.store.auditEntries(since: nil).map(\.pathAndQuery) == ["/Patient/pat-1", "/Observation?patient=pat-1"])
    }
}
