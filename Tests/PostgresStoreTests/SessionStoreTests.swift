import BFFTesting
import Cryptography
import Foundation
@testable import PostgresStore
import Sessions
import Testing

@Suite("PostgresSessionStore against a real PostgreSQL")
struct SessionStoreTests {
    let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded())

    func pending(_ iss: String = "https://ehr.example/fhir") -> PendingAuthorization {
        PendingAuthorization(iss: iss, codeVerifier: "verifier-\(UUID())", nonce: "nonce", launch: "L1", returnTo: "https://app.example/",
                             handoffChallenge: nil, expiresAt: now.addingTimeInterval(600))
    }

    func tokens(_ access: String = "ACCESS-\(UUID())") -> TokenSet {
        TokenSet(accessToken: access, refreshToken: "REFRESH-\(UUID())", idToken: "IDTOKEN-\(UUID())",
                 accessTokenExpiresAt: now.addingTimeInterval(3600), responseJSON: #"{"access_token":"\#(access)"}"#)
    }

    func launch(_ patient: String = "p1") -> (id: String, record: LaunchRecord) {
        let id = Identifier.make()
        return (id, LaunchRecord(idHash: Identifier.hash(id), iss: "https://ehr.example/fhir", sub: "user-1", fhirUser: "Practitioner/1",
                                 scope: "openid patient/*.rs", patient: patient, contextJSON: #"{"patient":"\#(patient)"}"#, createdAt: now))
    }

    @Test("a pending authorization is returned once, with its verifier decrypted")
    func pendingOnce() async throws {
        let db = try await TestDatabase.make()
        let p = pending()
        try await db.store.savePending(state: "state-1", p)
        #expect(try await db.store.consumePending(state: "state-1", now: now) == p)
        #expect(try await db.store.consumePending(state: "state-1", now: now) == nil)
        #expect(try await db.store.consumePending(state: "unknown", now: now) == nil)
    }

    @Test("an expired state is refused")
    func expiredState() async throws {
        let db = try await TestDatabase.make()
        var p = pending()
        p.expiresAt = now.addingTimeInterval(-1)
        try await db.store.savePending(state: "old", p)
        #expect(try await db.store.consumePending(state: "old", now: now) == nil)
    }

    @Test("50 concurrent consumers of one state: exactly one wins")
    func concurrentState() async throws {
        let db = try await TestDatabase.make(poolSize: 16)
        try await db.store.savePending(state: "contested", pending())
        let wins = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<50 { group.addTask { try await db.store.consumePending(state: "contested", now: now) != nil } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(wins == 1)
    }

    @Test("50 concurrent consumers of one hand-off code: exactly one wins")
    func concurrentHandoff() async throws {
        let db = try await TestDatabase.make(poolSize: 16)
        let session = try await db.store.createSession(ttl: 600, now: now)
        try await db.store.saveHandoff(code: "code-1", sessionHash: Identifier.hash(session), challenge: "c", expiresAt: now.addingTimeInterval(60))
        let wins = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<50 { group.addTask { try await db.store.consumeHandoff(code: "code-1", now: now) != nil } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(wins == 1)
    }

    @Test("sessions: create, find, rotate (old id dies, launches follow), expire, delete")
    func sessionLifecycle() async throws {
        let db = try await TestDatabase.make()
        let id = try await db.store.createSession(ttl: 600, now: now)
        let record = try #require(try await db.store.findSession(id: id, now: now))
        #expect(record.idHash == Identifier.hash(id))
        let l = launch()
        try await db.store.addLaunch(sessionID: id, l.record, tokens: tokens())
        let rotated = try #require(try await db.store.rotateSession(idHash: record.idHash, ttl: 600, now: now))
        #expect(rotated != id)
        #expect(try await db.store.findSession(id: id, now: now) == nil)
        #expect(try await db.store.findLaunch(sessionID: rotated, launchID: nil)?.idHash == l.record.idHash)
        #expect(try await db.store.findSession(id: rotated, now: now.addingTimeInterval(601)) == nil)
        let revoked = try await db.store.deleteSession(id: rotated)
        #expect(revoked.count == 1)
        #expect(try await db.store.findSession(id: rotated, now: now) == nil)
        #expect(try await db.store.tokens(launchHash: l.record.idHash) == nil)
    }

    @Test("launches: by id within the session only, most recent by default")
    func launches() async throws {
        let db = try await TestDatabase.make()
        let a = try await db.store.createSession(ttl: 600, now: now)
        let b = try await db.store.createSession(ttl: 600, now: now)
        var first = launch("p1"), second = launch("p2")
        second.record.createdAt = now.addingTimeInterval(1)
        first.record.createdAt = now
        try await db.store.addLaunch(sessionID: a, first.record, tokens: tokens())
        try await db.store.addLaunch(sessionID: a, second.record, tokens: tokens())
        #expect(try await db.store.findLaunch(sessionID: a, launchID: nil)?.patient == "p2")
        #expect(try await db.store.findLaunch(sessionID: a, launchID: first.id)?.patient == "p1")
        #expect(try await db.store.findLaunch(sessionID: b, launchID: first.id) == nil)
        #expect(try await db.store.deleteLaunch(sessionID: b, launchHash: first.record.idHash) == nil)
        #expect(try await db.store.deleteLaunch(sessionID: a, launchHash: first.record.idHash) != nil)
        #expect(try await db.store.findLaunch(sessionID: a, launchID: first.id) == nil)
    }

    @Test("no table holds a raw session id, launch id, state or any plaintext token")
    func nothingInTheClear() async throws {
        let db = try await TestDatabase.make()
        let session = try await db.store.createSession(ttl: 600, now: now)
        let l = launch()
        let t = tokens()
        try await db.store.addLaunch(sessionID: session, l.record, tokens: t)
        let p = pending()
        try await db.store.savePending(state: "STATE-SECRET-123", p)
        try await db.store.saveHandoff(code: "HANDOFF-SECRET-456", sessionHash: Identifier.hash(session), challenge: "ch", expiresAt: now.addingTimeInterval(60))
        let dump = try await dumpAllTables(db.pool)
        for secret in [session, l.id, "STATE-SECRET-123", "HANDOFF-SECRET-456", t.accessToken, t.refreshToken!, t.idToken!, p.codeVerifier] {
            #expect(!dump.contains(secret), "found a secret in the dump")
            #expect(!dump.contains(Identifier.hex(Array(secret.utf8))), "found a secret, hex-encoded, in the dump")
        }
        #expect(dump.contains(Identifier.hash(session)))
        #expect(try await db.store.tokens(launchHash: l.record.idHash) == t)
    }

    @Test("a token ciphertext moved to another row or column, or with a flipped bit, does not open: the launch has no tokens")
    func ciphertextBinding() async throws {
        let db = try await TestDatabase.make()
        let session = try await db.store.createSession(ttl: 600, now: now)
        let a = launch("p1"), b = launch("p2")
        try await db.store.addLaunch(sessionID: session, a.record, tokens: tokens("A-TOKEN"))
        try await db.store.addLaunch(sessionID: session, b.record, tokens: tokens("B-TOKEN"))
        try await db.pool.query("UPDATE tokens SET access_token = (SELECT access_token FROM tokens WHERE launch_hash = \(a.record.idHash)) WHERE launch_hash = \(b.record.idHash)")
        #expect(try await db.store.tokens(launchHash: b.record.idHash) == nil)
        #expect(try await db.store.tokens(launchHash: a.record.idHash)?.accessToken == "A-TOKEN")
        try await db.pool.query("UPDATE tokens SET access_token = refresh_token WHERE launch_hash = \(a.record.idHash)")
        #expect(try await db.store.tokens(launchHash: a.record.idHash) == nil)
        let c = launch("p3")
        try await db.store.addLaunch(sessionID: session, c.record, tokens: tokens("C-TOKEN"))
        try await db.pool.query("UPDATE tokens SET access_token = set_bit(access_token, 100, 1 - get_bit(access_token, 100)) WHERE launch_hash = \(c.record.idHash)")
        #expect(try await db.store.tokens(launchHash: c.record.idHash) == nil)
    }

    @Test("SQL injection through every string input is stored verbatim", arguments: [
        "'; DROP TABLE sessions; --", "\" OR 1=1 --", "$1", "\\x00'); DELETE FROM tokens; --", "Robert'); DROP TABLE launches;--",
    ])
    func injection(_ evil: String) async throws {
        let db = try await TestDatabase.make()
        let p = PendingAuthorization(iss: evil, codeVerifier: evil, nonce: evil, launch: evil, returnTo: evil, handoffChallenge: evil,
                                     expiresAt: now.addingTimeInterval(600))
        try await db.store.savePending(state: evil, p)
        #expect(try await db.store.consumePending(state: evil, now: now) == p)
        let session = try await db.store.createSession(ttl: 600, now: now)
        let l = LaunchRecord(idHash: Identifier.hash(evil), iss: evil, sub: evil, fhirUser: evil, scope: evil, patient: evil,
                             contextJSON: "{\"x\":\"\(evil.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\""))\"}", createdAt: now)
        try await db.store.addLaunch(sessionID: session, l, tokens: tokens(evil))
        #expect(try await db.store.findLaunch(sessionID: session, launchID: evil)?.sub == evil)
        #expect(try await db.store.tokens(launchHash: l.idHash)?.accessToken == evil)
        try await db.store.appendAudit([AuditEntry(at: now, launchHash: l.idHash, iss: evil, sub: evil, fhirUser: evil, patient: evil,
                                                   method: "GET", pathAndQuery: evil, upstreamStatus: 200, bytes: 1)])
        #expect(try await db.store.auditEntries(since: nil).first?.pathAndQuery == evil)
        let tables = try await db.pool.query("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        #expect(try tables[0].int(0) == 10)
    }

    @Test("audit batches of any size keep every row and its values, in order", arguments: [1, 2_500])
    func auditBatches(size: Int) async throws {
        let db = try await TestDatabase.make()
        let entries = (0..<size).map { i in
            AuditEntry(at: now.addingTimeInterval(Double(i)), launchHash: "h\(i)", iss: "i\(i)", sub: "s\(i)", fhirUser: i % 2 == 0 ? nil : "u\(i)",
                       patient: "p\(i)", method: "GET", pathAndQuery: "/Patient/\(i)", upstreamStatus: 200 + i % 3, bytes: Int64(i))
        }
        try await db.store.appendAudit(entries)
        let stored = try await db.store.auditEntries(since: nil)
        #expect(stored.count == size)
        for (i, entry) in stored.enumerated() {
            #expect(entry.launchHash == "h\(i)" && entry.pathAndQuery == "/Patient/\(i)" && entry.bytes == Int64(i))
            #expect(entry.at == now.addingTimeInterval(Double(i)) && entry.iss == "i\(i)" && entry.sub == "s\(i)" && entry.patient == "p\(i)")
            #expect(entry.fhirUser == (i % 2 == 0 ? nil : "u\(i)") && entry.upstreamStatus == 200 + i % 3)
        }
    }

    @Test("the audit trail is read a page at a time, in the order recorded (then by at, then as written): every entry once; since and until are honoured")
    func auditPages() async throws {
        let db = try await TestDatabase.make()
        // 23 entries recorded at 5 distinct instants (microsecond fractions included), each
        // instant shared by entries whose `at` differs, and whose `at` order is not the
        // recorded order.
        let recorded = [0.000_001, 1.3, 2.700_001, 3.999_999, 4.123_457].map { AuditInstant(microsecondsSince1970: 1_800_000_000_000_000 + Int64(($0 * 1e6).rounded())) }
        try await db.pool.query("""
            INSERT INTO audit_events (at, recorded_at, launch_hash, iss, sub, method, path, upstream_status, bytes)
            SELECT timestamptz '2027-01-15 08:00:00+00' - (n % 3) * interval '1 second' - (n % 5) * interval '1 minute',
                   (ARRAY[\(recorded[0].iso8601), \(recorded[1].iso8601), \(recorded[2].iso8601), \(recorded[3].iso8601), \(recorded[4].iso8601)])[n % 5 + 1]::timestamptz,
                   'h', 'i', 's', 'GET', '/Patient/' || n, 200, n
            FROM generate_series(0, 22) AS n
            """)
        let expected = (0..<23).sorted { a, b in (a % 5, -(a % 3), a) < (b % 5, -(b % 3), b) }.map { "/Patient/\($0)" }
        let until = AuditInstant(microsecondsSince1970: 1_900_000_000_000_000)
        for pageSize in [1, 2, 4, 5, 23, 100] {
            var pages: [[AuditEntry]] = []
            try await db.store.forEachAuditPage(recordedSince: nil, before: until, pageSize: pageSize) { page in
                pages.append(page)
                if pages.count > 23 { throw CancellationError() } // a cursor that repeats would page forever
            }
            #expect(pages.flatMap { $0 }.map(\.pathAndQuery) == expected, "page size \(pageSize)")
            #expect(pages.allSatisfy { $0.count <= pageSize && !$0.isEmpty })
        }
        var window: [AuditEntry] = [] // [recorded[1], recorded[3]): the instants 1 and 2, to the microsecond
        try await db.store.forEachAuditPage(recordedSince: recorded[1], before: recorded[3], pageSize: 2) { window += $0 }
        #expect(window.map(\.pathAndQuery) == expected.filter { [1, 2].contains(Int($0.dropFirst(9))! % 5) })
        #expect(window.allSatisfy { $0.recordedAt == recorded[1] || $0.recordedAt == recorded[2] })
    }

    @Test("paging is exact to the microsecond and through any number of entries recorded at one instant (as all those stored before migration 0004 are), over gaps of any length: every entry once, in order",
          arguments: [1, 2, 7, 40, 1_000])
    func auditPagesThroughTiesAndGaps(pageSize: Int) async throws {
        let db = try await TestDatabase.make()
        // At odd microseconds of the 24th century, where epoch seconds in a Double no longer
        // hold every microsecond (a cursor taken through one lands beside the row): 90 entries
        // at one instant, then three to an instant a microsecond apart, then instants spread
        // from a second to weeks apart.
        try await db.pool.query("""
            INSERT INTO audit_events (at, recorded_at, launch_hash, iss, sub, method, path, upstream_status, bytes)
            SELECT timestamptz '2381-06-01 00:00:00+00' + n * interval '1.000007 seconds',
                   timestamptz '2381-06-01 00:00:00.000001+00' + CASE
                       WHEN n < 90 THEN interval '0'
                       WHEN n < 150 THEN ((n - 90) / 3 + 1) * interval '1 microsecond'
                       ELSE (n - 149) ^ 4 * interval '1 second' END,
                   'h', 'i', 's', 'GET', '/Patient/' || n, 200, n
            FROM generate_series(0, 199) AS n
            """)
        let until = try #require(AuditInstant(iso8601: "2400-01-01T00:00:00Z"))
        var paths: [String] = []
        try await db.store.forEachAuditPage(recordedSince: nil, before: until, pageSize: pageSize) { page in
            paths += page.map(\.pathAndQuery)
            if paths.count > 200 { throw CancellationError() } // a cursor that repeats would page forever
        }
        #expect(paths == (0..<200).map { "/Patient/\($0)" })
        // From the middle of the shared instant's neighbours, to the microsecond.
        var later: [String] = []
        let since = try #require(AuditInstant(iso8601: "2381-06-01T00:00:00.000011Z"))
        try await db.store.forEachAuditPage(recordedSince: since, before: until, pageSize: pageSize) { later += $0.map(\.pathAndQuery) }
        #expect(later == (117..<200).map { "/Patient/\($0)" })
    }

    @Test("audit entries the database refuses are kept, escaped; the rest of their batch goes in unchanged",
          arguments: [false, true])
    func refusedAuditEntries(streamed: Bool) async throws {
        let db = try await TestDatabase.make()
        let entries = (0..<9).map { (i: Int) -> AuditEntry in
            let patient: String = i == 6 ? "pat\u{0}ient" : "p\(i)"
            let path: String = i == 2 ? "/Patient/a\u{0}b?name=é%" : "/Patient/\(i)"
            return AuditEntry(at: now.addingTimeInterval(Double(i)), launchHash: "h\(i)", iss: "i", sub: "s", fhirUser: nil,
                              patient: patient, method: "GET", pathAndQuery: path, upstreamStatus: 200, bytes: Int64(i))
        }
        if streamed { // three pieces of one COPY: the refused entries are in the first and the third
            var pieces = [entries[0..<3], entries[3..<5], entries[5...]].map(Array.init).makeIterator()
            try await db.store.appendAudit(lockWait: .seconds(5), batch: SecureRandom.bytes(16), streaming: { pieces.next() })
        } else {
            try await db.store.appendAudit(entries)
        }
        let stored = try await db.store.auditEntries(since: nil)
        #expect(stored.map(\.launchHash) == (0..<9).map { "h\($0)" })
        #expect(stored[2].pathAndQuery == "/Patient/a%00b?name=%C3%A9%25")
        #expect(stored[6].patient == "pat%00ient" && stored[6].pathAndQuery == "/Patient/6")
        for i in [0, 1, 3, 4, 5, 7, 8] { #expect(stored[i].pathAndQuery == "/Patient/\(i)" && stored[i].patient == "p\(i)") }
        // Escaped entries are marked, so "%00" from an escape is not taken for "%00" in a URL.
        #expect(stored.map(\.textEscaped) == (0..<9).map { $0 == 2 || $0 == 6 })
    }

    @Test("old audit entries go a chunk per statement, every one of them, however many chunks", arguments: [5, 10, 100])
    func auditDeletedInChunks(chunk: Int) async throws {
        let db = try await TestDatabase.make()
        let entry = { (i: Int, at: Date) in AuditEntry(at: at, launchHash: "h", iss: "i", sub: "s", fhirUser: nil, patient: nil, method: "GET",
                                                         pathAndQuery: "/Patient/\(i)", upstreamStatus: 200, bytes: 1) }
        let old = (0..<25).map { entry($0, now.addingTimeInterval(-86_400 - Double($0))) }
        let recent = (25..<28).map { entry($0, now) }
        try await db.store.appendAudit(old + recent)
        #expect(try await db.store.deleteAudit(before: now.addingTimeInterval(-3_600), chunk: chunk) == 25)
        #expect(try await db.store.auditEntries(since: nil).map(\.pathAndQuery) == ["/Patient/25", "/Patient/26", "/Patient/27"])
    }

    @Test("the sweeper deletes expired rows and audit entries past retention, and nothing else")
    func sweep() async throws {
        let db = try await TestDatabase.make()
        var old = pending()
        old.expiresAt = now.addingTimeInterval(-10)
        try await db.store.savePending(state: "old", old)
        try await db.store.savePending(state: "fresh", pending())
        let stale = try await db.store.createSession(ttl: 1, now: now.addingTimeInterval(-100))
        let live = try await db.store.createSession(ttl: 600, now: now)
        let entry = { (at: Date) in AuditEntry(at: at, launchHash: "h", iss: "i", sub: "s", fhirUser: nil, patient: nil, method: "GET",
                                                 pathAndQuery: "/Patient/1", upstreamStatus: 200, bytes: 10) }
        try await db.store.appendAudit([entry(now.addingTimeInterval(-3 * 86_400)), entry(now)])
        let removed = try await db.store.sweepExpired(now: now, auditRetentionDays: 2)
        #expect(removed == 3)
        #expect(try await db.store.consumePending(state: "fresh", now: now) != nil)
        #expect(try await db.store.findSession(id: live, now: now) != nil)
        #expect(try await db.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(Identifier.hash(stale))").isEmpty)
        #expect(try await db.store.auditEntries(since: nil).count == 1)
    }

    @Test("a sign-in that carries a session identifier another sign-in replaced joins the session that replaced it, for 10 minutes; then the sweeper forgets the replacement")
    func replacedSession() async throws {
        let db = try await TestDatabase.make()
        let (firstID, first) = launch("p1")
        let old = try await db.store.startSession(with: first, tokens: tokens(), replacing: nil, ttl: 3600, now: now).sessionID
        let (secondID, second) = launch("p2")
        let replacing = try await db.store.startSession(with: second, tokens: tokens(), replacing: old, ttl: 3600, now: now).sessionID
        let (thirdID, third) = launch("p3")
        let joined = try await db.store.startSession(with: third, tokens: tokens(), replacing: old, ttl: 3600, now: now.addingTimeInterval(599)).sessionID
        for id in [firstID, secondID, thirdID] {
            #expect(try await db.store.findLaunch(sessionID: joined, launchID: id) != nil, "a launch was left behind")
        }
        #expect(try await db.store.findSession(id: replacing, now: now.addingTimeInterval(599)) == nil)
        let later = now.addingTimeInterval(599 + 601) // 10 minutes after the last replacement
        #expect(try await db.store.sweepExpired(now: later, auditRetentionDays: 2) == 0)
        #expect(try await db.pool.query("SELECT 1 FROM retired_sessions").isEmpty)
        let (fourthID, fourth) = launch("p4")
        let alone = try await db.store.startSession(with: fourth, tokens: tokens(), replacing: old, ttl: 3600, now: later).sessionID
        #expect(try await db.store.findLaunch(sessionID: alone, launchID: fourthID) != nil)
        #expect(try await db.store.findLaunch(sessionID: alone, launchID: firstID) == nil, "a forgotten replacement still led somewhere")
    }

    @Test("retention deletes under a DBA's short statement_timeout, waiting out a lock longer than it")
    func retentionUnderShortStatementTimeout() async throws {
        let db = try await TestDatabase.make()
        try await db.store.appendAudit([AuditEntry(at: now.addingTimeInterval(-3 * 86_400), launchHash: "h", iss: "i", sub: "s", fhirUser: nil,
                                                   patient: nil, method: "GET", pathAndQuery: "/Patient/1", upstreamStatus: 200, bytes: 1)])
        try await DatabaseHold.setStatementTimeout("50ms", on: db.pool)
        let pool = ConnectionPool(url: db.url) // new connections: the database's new default
        defer { pool.close() }
        let store = PostgresSessionStore(pool: pool, tokenKey: try AESGCMKey(bytes: SecureRandom.bytes(32)))
        let holder = try await DatabaseHold.lock("audit_events", of: db.url, for: .milliseconds(300))
        #expect(try await store.deleteAudit(before: now.addingTimeInterval(-86_400)) == 1)
        try await holder.value
    }

    @Test("an export run as a role that cannot see the writers' transactions is told so; one that can is not")
    func hiddenSessions() async throws {
        let db = try await TestDatabase.make()
        let role = "auditor_\(UUID().uuidString.prefix(8).lowercased())"
        try await db.pool.query("CREATE ROLE \(raw: role) LOGIN")
        defer { Task { try? await db.pool.query("DROP ROLE IF EXISTS \(raw: role)") } }
        // A writer's session (the superuser the tests connect as), open meanwhile.
        let writer = ConnectionPool(url: db.url)
        defer { writer.close() }
        try await writer.query("SELECT 1")
        #expect(try await db.store.sessionsHiddenFromAuditClock() == 0)
        let auditorPool = ConnectionPool(url: db.url.replacingOccurrences(of: "user=postgres", with: "user=\(role)"))
        defer { auditorPool.close() }
        let auditor = PostgresSessionStore(pool: auditorPool, tokenKey: try AESGCMKey(bytes: SecureRandom.bytes(32)))
        #expect(try await auditor.sessionsHiddenFromAuditClock() >= 1)
    }

    @Test("touch writes at most once per interval")
    func touch() async throws {
        let db = try await TestDatabase.make()
        let id = try await db.store.createSession(ttl: 600, now: now)
        let record = try #require(try await db.store.findSession(id: id, now: now))
        try await db.store.touchSession(record, ttl: 600, now: now.addingTimeInterval(10))
        #expect(try await db.store.findSession(id: id, now: now)?.lastSeenAt.timeIntervalSince1970.rounded() == now.timeIntervalSince1970.rounded())
        try await db.store.touchSession(record, ttl: 600, now: now.addingTimeInterval(120))
        let touched = try #require(try await db.store.findSession(id: id, now: now))
        #expect(abs(touched.expiresAt.timeIntervalSince(now.addingTimeInterval(720))) < 1)
    }

    @Test("the token lock serialises refreshers and bumps the version")
    func tokenLock() async throws {
        let db = try await TestDatabase.make(poolSize: 16)
        let session = try await db.store.createSession(ttl: 600, now: now)
        let l = launch()
        try await db.store.addLaunch(sessionID: session, l.record, tokens: tokens("v1"))
        let refreshed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    try await db.store.withTokenLock(launchHash: l.record.idHash) { current in
                        guard current.version == 1 else { return (.keep, false) }
                        try await Task.sleep(for: .milliseconds(50))
                        var next = current
                        next.accessToken = "v2"
                        return (.replace(next, scope: nil), true)
                    } ?? false
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(refreshed == 1)
        let after = try #require(try await db.store.tokens(launchHash: l.record.idHash))
        #expect(after.accessToken == "v2" && after.version == 2)
    }

    @Test("the token lock of a launch that ended (a logout in another tab) is nil, and its body never runs")
    func tokenLockOfEndedLaunch() async throws {
        let db = try await TestDatabase.make(poolSize: 2)
        let session = try await db.store.createSession(ttl: 600, now: now)
        let l = launch()
        try await db.store.addLaunch(sessionID: session, l.record, tokens: tokens("v1"))
        _ = try await db.store.deleteSession(id: session)
        let result = try await db.store.withTokenLock(launchHash: l.record.idHash) { current -> (TokenLockOutcome, Bool) in
            Issue.record("the body ran for an ended launch")
            return (.keep, true)
        }
        #expect(result == nil)
    }

    func dumpAllTables(_ pool: ConnectionPool) async throws -> String {
        let tables = try await pool.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").map { try $0.string(0) }
        var dump = ""
        for table in tables {
            // Table names come from the catalogue, not from input.
            for row in try await pool.query("SELECT row_to_json(t)::text FROM \(raw: table) t") { dump += (row[0] ?? "") + "\n" }
        }
        // bytea columns appear as hex in JSON; also search the decoded bytes.
        return dump
    }
}

extension SessionStoreTests {
    @Test("an expired session with a launch is left to endExpiredSessions, which returns its tokens; sessions without launches are swept")
    func expiredSessionsEnded() async throws {
        let db = try await TestDatabase.make()
        let (l, t) = (launch().record, tokens())
        let expired = try await db.store.startSession(with: l, tokens: t, replacing: nil, ttl: 1, now: now.addingTimeInterval(-200)).sessionID
        let empty = try await db.store.createSession(ttl: 1, now: now.addingTimeInterval(-200))
        #expect(try await db.store.sweepExpired(now: now, auditRetentionDays: 30) == 1, "only the session without a launch")
        #expect(try await db.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(Identifier.hash(expired))").count == 1)
        #expect(try await db.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(Identifier.hash(empty))").isEmpty)
        let ended = try await db.store.endExpiredSessions(now: now, limit: 10)
        #expect(ended.map(\.0.idHash) == [l.idHash] && ended.first?.1.refreshToken == t.refreshToken)
        #expect(try await db.store.endExpiredSessions(now: now, limit: 10).isEmpty)
        #expect(try await db.pool.query("SELECT count(*) FROM launches")[0].int(0) == 0)
    }
}

extension SessionStoreTests {
    @Test("revocations that never finish (an EHR that hangs) hold up neither the sweep of other rows nor stop: and no more sessions are ended meanwhile")
    func sweeperWithHangingRevocation() async throws {
        let db = try await TestDatabase.make()
        _ = try await db.store.startSession(with: launch().record, tokens: tokens(), replacing: nil, ttl: 1, now: now.addingTimeInterval(-200))
        let handedOver = Counter()
        let sweeper = Sweeper(store: db.store, interval: .milliseconds(50), auditRetentionDays: 30, now: { now },
                              onEnded: { _ in
                                  handedOver.increment()
                                  try? await Task.sleep(for: .seconds(3600)) // the EHR never answers
                              })
        let deadline = ContinuousClock.now + .seconds(30) // a no-hang limit for a loaded machine
        while handedOver.current == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(handedOver.current == 1)
        // Later expiries: a session without launches (swept at once) and one with a launch (left for later).
        let empty = try await db.store.createSession(ttl: 1, now: now.addingTimeInterval(-100))
        let second = launch().record
        _ = try await db.store.startSession(with: second, tokens: tokens(), replacing: nil, ttl: 1, now: now.addingTimeInterval(-100))
        var gone = false
        while !gone, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            gone = try await db.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(Identifier.hash(empty))").isEmpty
        }
        #expect(gone, "the sweep went on while the revocation hung")
        let waiting = try await db.pool.query("SELECT 1 FROM launches WHERE id_hash = \(second.idHash)").count
        #expect(handedOver.current == 1 && waiting == 1, "no more sessions ended while the last revocation runs")
        sweeper.stop()
        await sweeper.wait()
    }
}
