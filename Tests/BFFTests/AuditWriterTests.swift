import BFF
import BFFTesting
import Cryptography
import Foundation
import Logging
import PostgresStore
import Sessions
import Testing

@Suite("PHI access audit writer")
struct AuditWriterTests {
    @Test("an entry whose write failed while the database was away is written once it is back, with no later request to trigger it; the status shows it pending meanwhile")
    func failedWriteIsRetriedOnItsOwn() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        let logs = LogSink()
        let writer = Self.writer(database.store, logs: logs)

        try await PostgresStoreAdmin.takeAway(database.url)
        writer.record(AuditEntry(at: Date(), launchHash: "launch-hash", iss: "https://ehr.example/fhir", sub: "practitioner-1",
                                 fhirUser: nil, patient: "pat-1", method: "GET", pathAndQuery: "/Patient/pat-1",
                                 upstreamStatus: 200, bytes: 1398))
        let deadline = ContinuousClock.now + .seconds(30)
        while !logs.captured.contains(where: { $0.contains("audit write failed") }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(logs.captured.contains { $0.contains("audit write failed") }, "the write did not fail while the database was away")
        let away = writer.status
        #expect(away.pending == 1 && away.written == 0 && away.failedWrites >= 1, "\(away)")

        // Back, and nothing else happens: the writer must try again by itself. Its pause has
        // doubled with each failure so far, up to 30 s: a limit of its own, not what is left.
        try await PostgresStoreAdmin.bringBack(database.url)
        let retried = ContinuousClock.now + .seconds(90)
        while writer.status.pending > 0 && ContinuousClock.now < retried {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(writer.status.pending == 0 && writer.status.written == 1, "\(writer.status)")
        let written = try await database.store.auditEntries(since: nil)
        #expect(written.count == 1, "the entry was lost, or written more than once")
        #expect(written.first?.pathAndQuery == "/Patient/pat-1")
        database.pool.close()
    }
    @Test("entries reach the database as they are recorded, in pieces of one COPY that commits them together; flush commits at once")
    func entriesStreamIntoOneCopy() async throws {
        let database = try await TestDatabase.make(poolSize: 4)
        defer { database.pool.close() }
        let writer = Self.writer(database.store) { $0.interval = .seconds(60) } // the COPY stays open until the flush

        writer.record(entry("/Patient/1"))
        #expect(try await copyProgress(database, reaches: 1), "the first entry was not sent while its COPY was open")
        writer.record(entry("/Patient/2"))
        #expect(try await copyProgress(database, reaches: 2), "the second entry did not join the open COPY")
        #expect(try await database.store.auditEntries(since: nil).isEmpty, "entries were committed before their COPY ended")
        #expect(writer.status.pending == 2)

        let flushing = ContinuousClock.now
        await writer.flush()
        #expect(ContinuousClock.now - flushing < .seconds(30), "the flush waited for the COPY's interval")
        #expect(try await database.store.auditEntries(since: nil).map(\.pathAndQuery) == ["/Patient/1", "/Patient/2"])
        #expect(writer.status.pending == 0 && writer.status.written == 2 && writer.status.failedWrites == 0, "\(writer.status)")
    }

    @Test("a COPY cut off midway (its server process ended) loses nothing and writes nothing twice")
    func copyCutOffLosesNothing() async throws {
        let database = try await TestDatabase.make(poolSize: 4)
        defer { database.pool.close() }
        let logs = LogSink()
        let writer = Self.writer(database.store, logs: logs) { timing in
            timing.interval = .seconds(60)
            timing.firstRetry = .seconds(60) // no retry of its own before the test's flush
        }

        writer.record(entry("/Patient/1"))
        #expect(try await copyProgress(database, reaches: 1))
        try await database.pool.query("SELECT pg_terminate_backend(pid) FROM pg_stat_progress_copy WHERE \(raw: Self.thisDatabasesCopy)")
        await writer.flush() // ends the COPY, which fails
        #expect(logs.captured.contains { $0.contains("audit write failed") })
        #expect(writer.status.failedWrites == 1 && writer.status.pending == 1 && writer.status.written == 0, "\(writer.status)")

        writer.record(entry("/Patient/2"))
        await writer.flush()
        #expect(try await database.store.auditEntries(since: nil).map(\.pathAndQuery) == ["/Patient/1", "/Patient/2"])
        #expect(writer.status.pending == 0 && writer.status.written == 2 && writer.status.failedWrites == 1, "\(writer.status)")
    }

    @Test("a statement_timeout on the database shorter than the time a COPY stays open does not stop the trail")
    func shortStatementTimeout() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        defer { database.pool.close() }
        try await PostgresStoreAdmin.setting(database.url, "statement_timeout", to: "250ms")
        let pool = PostgresStoreAdmin.pool(database.url) // new connections, which have the setting
        defer { pool.close() }
        // The test's own reads must not depend on how fast a loaded machine answers them.
        let reader = PostgresStoreAdmin.pool(database.url + "&options=-c%20statement_timeout%3D0")
        defer { reader.close() }
        #expect(try await pool.query("SHOW statement_timeout").first?[0] == "250ms")
        #expect(try await reader.query("SHOW statement_timeout").first?[0] == "0")
        let logs = LogSink()
        let writer = Self.writer(PostgresSessionStore(pool: pool, tokenKey: database.tokenKey), logs: logs) { $0.interval = .seconds(60) }

        writer.record(entry("/Patient/1"))
        try await Task.sleep(for: .milliseconds(600)) // the COPY stays open more than twice the server's limit
        writer.record(entry("/Patient/2"))
        await writer.flush()
        #expect(writer.status.failedWrites == 0 && writer.status.written == 2, "\(writer.status) \(logs.captured)")
        let written = try await PostgresSessionStore(pool: reader, tokenKey: database.tokenKey).auditEntries(since: nil)
        #expect(written.map(\.pathAndQuery) == ["/Patient/1", "/Patient/2"])
    }

    @Test("a stopped writer tries no more: a failed write stays failed, and nothing new is written")
    func stoppedWriterTriesNoMore() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        defer { database.pool.close() }
        let writer = Self.writer(database.store) { $0.firstRetry = .milliseconds(20) }
        try await PostgresStoreAdmin.takeAway(database.url)
        writer.record(entry("/Patient/1"))
        await writer.flush()
        writer.stop()
        // A retry may be under way when stop() runs (this task can resume after the first
        // one's 20 ms): it ends, failed, meanwhile. The count is taken after that.
        try await Task.sleep(for: .seconds(1))
        let failed = writer.status.failedWrites
        #expect(failed >= 1)
        // Retries doubling from 20 ms would start in any window from t to 2t after the
        // failure: one would come in these 2 s if the writer still tried.
        try await Task.sleep(for: .seconds(2))
        #expect(writer.status.failedWrites == failed, "\(writer.status)")

        try await PostgresStoreAdmin.bringBack(database.url)
        writer.record(entry("/Patient/2"))
        try await Task.sleep(for: .milliseconds(500))
        #expect(writer.status.pending == 2 && writer.status.written == 0, "\(writer.status)")
        #expect(try await database.store.auditEntries(since: nil).isEmpty)
    }

    @Test("a table lock held elsewhere (a DBA's VACUUM FULL) fails the write within seconds, where it would hold the writer and a shutdown's flush")
    func lockedTableFailsTheWrite() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        defer { database.pool.close() }
        let writer = Self.writer(database.store) { $0.firstRetry = .seconds(60) }
        let lock = try await TableLock.take(database.url)

        writer.record(entry("/Patient/1"))
        let started = ContinuousClock.now
        await writer.flush()
        // The writer's lock_timeout is 5 s; without it, its statement_timeout would end the
        // wait at 60 s. Timed on this task, which a busy machine can hold back: 30 s.
        #expect(ContinuousClock.now - started < .seconds(30), "the flush waited for the lock")
        #expect(writer.status.failedWrites == 1 && writer.status.pending == 1, "\(writer.status)")

        try await lock.release()
        await writer.flush()
        #expect(try await database.store.auditEntries(since: nil).map(\.pathAndQuery) == ["/Patient/1"])
    }

    @Test("a write whose COMMIT was carried out but whose answer was lost (the connection broke) is not written again: each entry once",
          arguments: [
              (["/Patient/1", "/Patient/2"], ["/Patient/1", "/Patient/2"]),
              // Refused for a value and written again with it escaped: the refused COPY rolls
              // back (no COMMIT), so the answer lost is the rewrite's.
              (["/Patient/1", "/Patient/a\u{0}b"], ["/Patient/1", "/Patient/a%00b"]),
          ])
    func lostCommitAnswerWritesNothingTwice(recorded: [String], stored expected: [String]) async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        defer { database.pool.close() }
        let relay = try CommitAnswerLoss(inFrontOf: database.url)
        defer { relay.shutdown() }
        let pool = ConnectionPool(url: relay.url)
        defer { pool.close() }
        let writer = Self.writer(PostgresSessionStore(pool: pool, tokenKey: database.tokenKey)) { $0.firstRetry = .milliseconds(50) }

        for path in recorded { writer.record(entry(path)) }
        await writer.flush() // gives up at the failure: the writer saw its connection break
        #expect(relay.answerLost && writer.status.failedWrites == 1, "\(writer.status)")
        let deadline = ContinuousClock.now + .seconds(30) // a no-hang limit only
        while writer.status.pending > 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }

        #expect(writer.status.pending == 0 && writer.status.written == 2, "\(writer.status)")
        let stored = try await database.store.auditEntries(since: nil).map(\.pathAndQuery)
        #expect(stored == expected, "written twice, or lost: \(stored)")
    }

    /// The settle that follows a lost COMMIT answer claims the batch's id. When its own answer
    /// is lost too (a second break), it is asked again, and must not take its claim for the
    /// write: the entries would be dropped as stored, silently.
    @Test("a settle asked again answers as it did: a batch it claimed is never taken for one stored, nor one stored for one claimed")
    func settleAskedAgainAnswersTheSame() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        defer { database.pool.close() }
        let lostWrite = SecureRandom.bytes(16), storedWrite = SecureRandom.bytes(16)
        #expect(try await database.store.settleAuditBatch(lostWrite) == false)
        #expect(try await database.store.settleAuditBatch(lostWrite) == false, "the claim was taken for a write")
        var pieces = [[entry("/Patient/1")]]
        try await database.store.appendAudit(lockWait: .seconds(5), batch: storedWrite) { pieces.popLast() }
        #expect(try await database.store.settleAuditBatch(storedWrite) == true)
        #expect(try await database.store.settleAuditBatch(storedWrite) == true)
        #expect(try await database.store.auditEntries(since: nil).map(\.pathAndQuery) == ["/Patient/1"])
    }

    @Test("a backlog of more than a batch, left by failed writes, is written whole and each entry once, once the database is back")
    func backlogIsWrittenWhole() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        defer { database.pool.close() }
        let logs = LogSink()
        let writer = Self.writer(database.store, logs: logs) { $0.batchSize = 100 }
        try await PostgresStoreAdmin.takeAway(database.url)
        let paths = (0..<450).map { "/Observation/\($0)" }
        for path in paths { writer.record(entry(path)) }
        let deadline = ContinuousClock.now + .seconds(30)
        while !logs.captured.contains(where: { $0.contains("audit write failed") }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(writer.status.pending == 450 && writer.status.failedWrites >= 1, "\(writer.status)")
        try await PostgresStoreAdmin.bringBack(database.url)
        let retried = ContinuousClock.now + .seconds(90)
        while writer.status.pending > 0 && ContinuousClock.now < retried {
            try await Task.sleep(for: .milliseconds(100))
        }
        // COPYs of 100 at most; every entry once.
        let written = try await database.store.auditEntries(since: nil).map(\.pathAndQuery)
        #expect(written.count == 450 && Set(written) == Set(paths), "\(written.count) written")
        #expect(writer.status.written == 450 && writer.status.pending == 0, "\(writer.status)")
    }

    @Test("maxPending entries waiting for the database make the writer backed up until they are written; an entry is never dropped")
    func backedUpAtMaxPending() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        defer { database.pool.close() }
        let writer = Self.writer(database.store) { $0.maxPending = 3 }
        try await PostgresStoreAdmin.takeAway(database.url)
        writer.record(entry("/Patient/1"))
        writer.record(entry("/Patient/2"))
        #expect(!writer.isBackedUp)
        writer.record(entry("/Patient/3"))
        #expect(writer.isBackedUp)
        writer.record(entry("/Patient/4")) // recorded all the same: the read it records was made
        #expect(writer.status.pending == 4)
        try await PostgresStoreAdmin.bringBack(database.url)
        let retried = ContinuousClock.now + .seconds(90)
        while writer.status.pending > 0 && ContinuousClock.now < retried {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(!writer.isBackedUp)
        #expect(try await database.store.auditEntries(since: nil).count == 4)
    }

    @Test("writes failing for maxFailingTime make the writer backed up (reads refused) however few entries wait, then, not at its next retry, with one critical log line; it recovers, and says so, once they are written")
    func backedUpAfterFailingForLong() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        defer { database.pool.close() }
        let logs = LogSink()
        let writer = Self.writer(database.store, logs: logs) { timing in
            timing.maxFailingTime = .seconds(2)
            timing.firstRetry = .seconds(60) // no second failure for a minute: the refusal must not wait for one
        }
        try await PostgresStoreAdmin.takeAway(database.url)
        writer.record(entry("/Patient/1")) // one entry: far below maxPending
        let deadline = ContinuousClock.now + .seconds(40)
        while !writer.isBackedUp && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(writer.isBackedUp, "writes failed for 2 s and the writer did not refuse before its next retry")
        #expect(writer.status.pending == 1)
        #expect(logs.captured.filter { $0.contains("FHIR reads are refused") }.count == 1)
        #expect(logs.captured.contains { $0.contains("audit write failed") && $0.contains("\"error.detail\":\"database error: connection failed") })

        try await PostgresStoreAdmin.bringBack(database.url)
        await writer.flush() // ends the minute's pause: the retry comes now
        let retried = ContinuousClock.now + .seconds(60)
        while writer.isBackedUp && ContinuousClock.now < retried { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!writer.isBackedUp)
        #expect(try await database.store.auditEntries(since: nil).count == 1)
        #expect(logs.captured.contains { $0.contains("audit trail written again") && $0.contains("\"level\":\"error\"") }, "\(logs.captured)")
    }

    /// A `COPY` into this database's audit table (the view covers the whole cluster, where
    /// other tests run their own).
    private static let thisDatabasesCopy = "relid = 'audit_events'::regclass AND datid = (SELECT oid FROM pg_database WHERE datname = current_database())"

    /// A writer on `store`, its log lines in `logs`, its timing as `adjust` leaves it.
    private static func writer(_ store: any SessionStore, logs: LogSink = LogSink(),
                               _ adjust: (inout AuditWriter.Timing) -> Void = { _ in }) -> AuditWriter {
        var timing = AuditWriter.Timing()
        adjust(&timing)
        return AuditWriter(store: store, logger: Logger(label: "audit-test") { JSONLogHandler(label: $0, sink: logs) }, timing: timing)
    }

    private func entry(_ path: String) -> AuditEntry {
        AuditEntry(at: Date(), launchHash: "launch-hash", iss: "https://ehr.example/fhir", sub: "practitioner-1", fhirUser: nil,
                   patient: "pat-1", method: "GET", pathAndQuery: path, upstreamStatus: 200, bytes: 1398)
    }

    /// Whether a `COPY` into the audit table is open and has processed `count` rows, within 30 s.
    private func copyProgress(_ database: TestDatabase, reaches count: Int) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let rows = try await database.pool.query("SELECT tuples_processed FROM pg_stat_progress_copy WHERE \(raw: Self.thisDatabasesCopy)")
            if let processed = try rows.first?.int(0), processed >= count { return true }
            try await Task.sleep(for: .milliseconds(5))
        }
        return false
    }
}
