import BFFTesting
import Cryptography
import Foundation
import PostgresStore
import Sessions
import Synchronization
import Testing

@Suite("PostgresSessionStore: hostile input, expiry, upkeep")
struct SessionStoreEdgeTests {
    let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded())

    static let evil = ["'; DROP TABLE sessions; --", "x' OR '1'='1", "$1", "\u{0}'); DELETE FROM tokens; --", "%_\\"]

    func tableCount(_ db: TestDatabase) async throws -> Int {
        try await db.pool.query("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")[0].int(0)
    }

    @Test("hostile identifiers (session ids, launch ids, hand-off codes) find nothing and break nothing", arguments: evil)
    func hostileIdentifiers(_ evil: String) async throws {
        let db = try await TestDatabase.make()
        let before = try await tableCount(db)
        let session = try await db.store.createSession(ttl: 600, now: now)
        #expect(try await db.store.findSession(id: evil, now: now) == nil)
        #expect(try await db.store.findLaunch(sessionID: session, launchID: evil) == nil)
        #expect(try await db.store.consumeHandoff(code: evil, now: now) == nil)
        #expect(try await db.store.deleteSession(id: evil).isEmpty)
        // These take hashes, which are hex; anything else finds nothing (or, with a NUL, is refused).
        if evil.utf8.contains(0) {
            await #expect(throws: PostgresError.self) { try await db.store.rotateSession(idHash: evil, ttl: 600, now: now) }
        } else {
            #expect(try await db.store.deleteLaunch(sessionID: evil, launchHash: evil) == nil)
            #expect(try await db.store.rotateSession(idHash: evil, ttl: 600, now: now) == nil)
        }
        // A hostile code and challenge are stored and read back verbatim, or, when PostgreSQL
        // text cannot hold them (NUL), refused: never stored cut short.
        if evil.utf8.contains(0) {
            await #expect(throws: PostgresError.self) {
                try await db.store.saveHandoff(code: evil, sessionHash: Identifier.hash(session), challenge: evil, expiresAt: now.addingTimeInterval(60))
            }
        } else {
            try await db.store.saveHandoff(code: evil, sessionHash: Identifier.hash(session), challenge: evil, expiresAt: now.addingTimeInterval(60))
            let handoff = try await db.store.consumeHandoff(code: evil, now: now)
            #expect(handoff?.challenge == evil && handoff?.sessionHash == Identifier.hash(session))
        }
        #expect(try await db.store.findSession(id: session, now: now) != nil)
        #expect(try await tableCount(db) == before)
    }

    @Test("an expired hand-off code is refused, and burnt")
    func expiredHandoff() async throws {
        let db = try await TestDatabase.make()
        let session = try await db.store.createSession(ttl: 600, now: now)
        try await db.store.saveHandoff(code: "late", sessionHash: Identifier.hash(session), challenge: "c", expiresAt: now.addingTimeInterval(60))
        #expect(try await db.store.consumeHandoff(code: "late", now: now.addingTimeInterval(61)) == nil)
        #expect(try await db.store.consumeHandoff(code: "late", now: now) == nil)
    }

    @Test("an expired session is not found and cannot be touched back to life")
    func expiredSession() async throws {
        let db = try await TestDatabase.make()
        let id = try await db.store.createSession(ttl: 60, now: now)
        let record = try #require(try await db.store.findSession(id: id, now: now))
        let later = now.addingTimeInterval(61)
        #expect(try await db.store.findSession(id: id, now: later) == nil)
        try await db.store.touchSession(record, ttl: 600, now: later)
        #expect(try await db.store.findSession(id: id, now: later) == nil)
    }

    @Test("a session whose lifetime is no longer than the touch interval (60 s) is still extended by use")
    func shortLifetime() async throws {
        let db = try await TestDatabase.make()
        let id = try await db.store.createSession(ttl: 60, now: now)
        var clock = now
        for _ in 0..<6 { // two minutes of use, a request every 20 s
            clock = clock.addingTimeInterval(20)
            let record = try #require(try await db.store.findSession(id: id, now: clock), "alive at +\(clock.timeIntervalSince(now)) s")
            try await db.store.touchSession(record, ttl: 60, now: clock)
        }
        #expect(try await db.store.findSession(id: id, now: clock.addingTimeInterval(61)) == nil, "and it ends a lifetime after its last use")
    }

    @Test("concurrent touches of one session write once")
    func concurrentTouch() async throws {
        let db = try await TestDatabase.make()
        let id = try await db.store.createSession(ttl: 600, now: now)
        let record = try #require(try await db.store.findSession(id: id, now: now))
        let xmin = { try await db.pool.query("SELECT xmin::text FROM sessions WHERE id_hash = \(record.idHash)")[0].string(0) }
        let before = try await xmin()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<10 {
                group.addTask { try await db.store.touchSession(record, ttl: 600, now: now.addingTimeInterval(120 + Double(i) / 100)) }
            }
            try await group.waitForAll()
        }
        let after = try await xmin()
        #expect(after != before)
        // Touched once: last_seen_at moved, and a second round within the interval does nothing.
        let touched = try #require(try await db.store.findSession(id: id, now: now))
        try await db.store.touchSession(touched, ttl: 600, now: touched.lastSeenAt.addingTimeInterval(30))
        #expect(try await xmin() == after)
    }

    @Test("the Sweeper ends expired sessions (their tokens to revoke) while the audit trail's retention waits on a lock")
    func sweeperEndsSessionsFirst() async throws {
        let db = try await TestDatabase.make()
        let launch = LaunchRecord(idHash: Identifier.hash(Identifier.make()), iss: "https://ehr.example/fhir", sub: "u", fhirUser: nil,
                                  scope: "", patient: nil, contextJSON: "{}", createdAt: now.addingTimeInterval(-200))
        let tokens = TokenSet(accessToken: "a", refreshToken: "r", idToken: nil, accessTokenExpiresAt: nil, responseJSON: "{}")
        _ = try await db.store.startSession(with: launch, tokens: tokens, replacing: nil, ttl: 1, now: now.addingTimeInterval(-200))
        let holder = try await DatabaseHold.lock("audit_events", of: db.url, for: .seconds(3))
        defer { holder.cancel() }
        let ended = Mutex<[String]>([])
        let sweeper = Sweeper(store: db.store, interval: .milliseconds(50), auditRetentionDays: 30, now: { now },
                              onEnded: { e in ended.withLock { $0 += e.map(\.0.idHash) } })
        for _ in 0..<100 where ended.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(20)) }
        #expect(ended.withLock { $0 } == [launch.idHash], "the expired session waited for the retention's lock")
        sweeper.stop()
        holder.cancel()
        await sweeper.wait()
    }

    @Test("the Sweeper removes expired rows in the background and stops when asked")
    func sweeper() async throws {
        let db = try await TestDatabase.make()
        let stale = try await db.store.createSession(ttl: 1, now: now.addingTimeInterval(-100))
        let swept = Mutex(0)
        let sweeper = Sweeper(store: db.store, interval: .milliseconds(50), auditRetentionDays: 30, now: { now },
                              onSweep: { n in swept.withLock { $0 += n } })
        var gone = false
        for _ in 0..<100 where !gone {
            try await Task.sleep(for: .milliseconds(20))
            gone = try await db.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(Identifier.hash(stale))").isEmpty
        }
        #expect(gone)
        sweeper.stop()
        await sweeper.wait()
        #expect(swept.withLock { $0 } >= 1)
        // Stopped: a newly expired row stays.
        let later = try await db.store.createSession(ttl: 1, now: now.addingTimeInterval(-100))
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await db.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(Identifier.hash(later))").count == 1)
    }
}
