@testable import BFF
import Foundation
import Sessions
import Synchronization
import Testing

/// When a busy session's cache entry expires, the requests in flight share one database
/// lookup instead of each running its own; an invalidation is never crossed by one.
@Suite("FHIR proxy session cache: shared lookups")
struct ProxySessionLoadTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// A counter the lookups share.
    final class Count: Sendable {
        private let value = Atomic(0)
        @discardableResult func next() -> Int { value.add(1, ordering: .relaxed).newValue }
        var current: Int { value.load(ordering: .relaxed) }
    }

    /// A flag a lookup waits for.
    final class Flag: Sendable {
        private let value = Atomic(false)
        func raise() { value.store(true, ordering: .relaxed) }
        var isRaised: Bool { value.load(ordering: .relaxed) }
    }
    static let key = ProxySessionCache.Key(sessionID: "session", launchID: nil)

    /// What a lookup read: `version` tells the lookups apart.
    static func context(version: Int) -> (ProxyContext, LaunchRecord) {
        let launch = LaunchRecord(idHash: "launch", iss: "https://ehr.example/fhir", sub: "u", fhirUser: nil,
                                  scope: "patient/*.read", patient: "p", contextJSON: "{}", createdAt: now)
        let session = SessionRecord(idHash: "s", createdAt: now, lastSeenAt: now, expiresAt: now.addingTimeInterval(3600))
        return (ProxyContext(session: session, launch: launch, accessToken: "t", accessTokenExpiresAt: nil, tokenVersion: version), launch)
    }

    @Test("32 concurrent misses run one lookup and all get its entry")
    func concurrentMissesShareOneLookup() async throws {
        let cache = ProxySessionCache(ttl: 60, publicFHIRBase: "http://bff.example/fhir", tokenKeys: [Array(repeating: 7, count: 32)])
        let lookups = Count()
        let versions = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<32 {
                group.addTask {
                    try await cache.entry(for: Self.key, now: Self.now) { generation in
                        let n = lookups.next()
                        try await Task.sleep(for: .milliseconds(50)) // the query takes a while
                        let (context, launch) = Self.context(version: n)
                        return cache.store(context, launch: launch, for: Self.key, generation: generation, now: Self.now)
                    }.context.tokenVersion
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(lookups.current == 1)
        #expect(versions == Array(repeating: 1, count: 32))
    }

    @Test("a miss after an invalidation does not join the lookup that began before it")
    func invalidationStartsAFreshLookup() async throws {
        let cache = ProxySessionCache(ttl: 60, publicFHIRBase: "http://bff.example/fhir", tokenKeys: [Array(repeating: 7, count: 32)])
        let release = Flag()
        let first = Task {
            try await cache.entry(for: Self.key, now: Self.now) { generation in
                while !release.isRaised { try await Task.sleep(for: .milliseconds(5)) }
                let (context, launch) = Self.context(version: 1) // read before the logout
                return cache.store(context, launch: launch, for: Self.key, generation: generation, now: Self.now)
            }
        }
        while !cache.isLoading(Self.key) { try await Task.sleep(for: .milliseconds(5)) } // the first lookup is under way
        cache.invalidate(sessionHash: "s")
        let secondDone = Flag()
        let second = Task {
            defer { secondDone.raise() }
            return try await cache.entry(for: Self.key, now: Self.now) { generation in
                let (context, launch) = Self.context(version: 2)
                return cache.store(context, launch: launch, for: Self.key, generation: generation, now: Self.now)
            }
        }
        // It must finish while the first lookup is still held (a 'no hang' bound only).
        for _ in 0..<1000 where !secondDone.isRaised { try await Task.sleep(for: .milliseconds(10)) }
        #expect(secondDone.isRaised, "the miss after the invalidation waited for the lookup that began before it")
        release.raise()
        #expect(try await second.value.context.tokenVersion == 2)
        #expect(try await first.value.context.tokenVersion == 1)
        // The first lookup's read, older than the invalidation, was not kept.
        #expect(cache.entry(for: Self.key, now: Self.now)?.context.tokenVersion == 2)
    }

    @Test("a failed lookup fails every caller that shared it; the next miss looks up again")
    func failuresAreSharedOnce() async throws {
        struct Down: Error {}
        let cache = ProxySessionCache(ttl: 60, publicFHIRBase: "http://bff.example/fhir", tokenKeys: [Array(repeating: 7, count: 32)])
        let lookups = Count()
        let failures = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    do {
                        _ = try await cache.entry(for: Self.key, now: Self.now) { _ in
                            lookups.next()
                            try await Task.sleep(for: .milliseconds(50))
                            throw Down()
                        }
                        return false
                    } catch { return error is Down }
                }
            }
            return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(failures == 8)
        let before = lookups.current
        let entry = try await cache.entry(for: Self.key, now: Self.now) { generation in
            lookups.next()
            let (context, launch) = Self.context(version: 3)
            return cache.store(context, launch: launch, for: Self.key, generation: generation, now: Self.now)
        }
        #expect(entry.context.tokenVersion == 3 && lookups.current == before + 1)
    }

    @Test("with the cache off (0 s) every read looks up, concurrent ones too")
    func cacheOffLooksUpEveryTime() async throws {
        let cache = ProxySessionCache(ttl: 0, publicFHIRBase: "http://bff.example/fhir", tokenKeys: [Array(repeating: 7, count: 32)])
        let lookups = Count()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    _ = try await cache.entry(for: Self.key, now: Self.now) { generation in
                        lookups.next()
                        try await Task.sleep(for: .milliseconds(50))
                        let (context, launch) = Self.context(version: 1)
                        return cache.store(context, launch: launch, for: Self.key, generation: generation, now: Self.now)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(lookups.current == 8)
    }
}
