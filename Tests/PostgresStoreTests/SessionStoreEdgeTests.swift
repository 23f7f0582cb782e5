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

extension SessionStoreEdgeTests {
    @Test("an expired session with a launch is left to endExpiredSessions, which returns its tokens; sessions without launches are swept")
    func expiredSessionsEnded() async throws {
        let db = try await TestDatabase.make()
        let launch = LaunchRecord(idHash: "launch-1", iss: "https://ehr.example/fhir", sub: "u", fhirUser: nil, scope: "openid",
                                  patient: "p", contextJSON: "{}", createdAt: now.addingTimeInterval(-200))
        let tokens = TokenSet(accessToken: "a", refreshToken: "r", idToken: nil, accessTokenExpiresAt: nil, responseJSON: "{}")
        let expired = try await db.store.startSession(with: launch, tokens: tokens, replacing: nil, ttl: 1,
                                                      now: now.addingTimeInterval(-200)).sessionID
        let empty = try await db.store.createSession(ttl: 1, now: now.addingTimeInterval(-200))
        #expect(try await db.store.sweepExpired(now: now, auditRetentionDays: 30) == 1, "only the session without a launch")
        #expect(try await db.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(Identifier.hash(expired))").count == 1)
        #expect(try await db.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(Identifier.hash(empty))").isEmpty)
        let ended = try await db.store.endExpiredSessions(now: now, limit: 10)
        #expect(ended.map(\.0.idHash) == ["launch-1"] && ended.first?.1.refreshToken == "r")
        #expect(try await db.store.endExpiredSessions(now: now, limit: 10).isEmpty)
        #expect(try await db.pool.query("SELECT count(*) FROM launches")[0].int(0) == 0)
    }
}

extension SessionStoreEdgeTests {
    @Test("revocations that never finish (an EHR that hangs) hold up neither the sweep of other rows nor stop: and no more sessions are ended meanwhile")
    func sweeperWithHangingRevocation() async throws {
        let db = try await TestDatabase.make()
        let launch = { (hash: String) in
            LaunchRecord(idHash: hash, iss: "https://ehr.example/fhir", sub: "u", fhirUser: nil, scope: "openid",
                         patient: "p", contextJSON: "{}", createdAt: now.addingTimeInterval(-200))
        }
        let tokens = TokenSet(accessToken: "a", refreshToken: "r", idToken: nil, accessTokenExpiresAt: nil, responseJSON: "{}")
        _ = try await db.store.startSession(with: launch("launch-1"), tokens: tokens, replacing: nil, ttl: 1, now: now.addingTimeInterval(-200))
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
        _ = try await db.store.startSession(with: launch("launch-2"), tokens: tokens, replacing: nil, ttl: 1, now: now.addingTimeInterval(-100))
        var gone = false
        while !gone, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            gone = try await db.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(Identifier.hash(empty))").isEmpty
        }
        #expect(gone, "the sweep went on while the revocation hung")
        let waiting = try await db.pool.query("SELECT 1 FROM launches WHERE id_hash = 'launch-2'").count
        #expect(handedOver.current == 1 && waiting == 1, "no more sessions ended while the last revocation runs")
        sweeper.stop()
        await sweeper.wait()
    }
}
