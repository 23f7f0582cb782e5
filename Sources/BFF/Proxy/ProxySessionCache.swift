import Foundation
import SMART
import Sessions
import Synchronization

/// What the FHIR proxy needs for a session, kept in memory for a few seconds so that a burst
/// of reads costs one database query, not one each (the query and its PostgreSQL backend
/// were most of the proxy's CPU time).
///
/// Entries live at most `ttl` seconds and never past the session's `expires_at`. This
/// process drops them at once when it ends, refreshes or logs out a launch or session
/// (`invalidate`). Another instance's logout reaches this one within `ttl`; revoked tokens
/// are refused by the EHR at once anyway. `ttl` 0 turns the cache off.
final class ProxySessionCache: Sendable {
    struct Key: Hashable, Sendable {
        let sessionID: String
        let launchID: String?
    }

    /// A class, immutable: a read takes it from the cache with one reference count, not one
    /// for each string and array its fields hold.
    final class Entry: Sendable {
        let context: ProxyContext
        let launch: LaunchRecord
        /// `launch.scope`, parsed once.
        let scopes: SMARTScopes
        /// Rewrites the launch's EHR base to the BFF's in Bundles (its patterns built once).
        let rewriter: URLRewriter
        /// Binds the ids of the launch's HAPI-style paging links to it.
        let pages: PageBinding
        let fetchedAt: Date

        init(context: ProxyContext, launch: LaunchRecord, scopes: SMARTScopes, rewriter: URLRewriter, pages: PageBinding, fetchedAt: Date) {
            self.context = context
            self.launch = launch
            self.scopes = scopes
            self.rewriter = rewriter
            self.pages = pages
            self.fetchedAt = fetchedAt
        }
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        /// Bumped by every invalidation, so that a lookup that raced one does not store what
        /// it read before it.
        var generation: UInt64 = 0
        /// Lookups under way, by key: concurrent misses of one key share one.
        var loading: [Key: Task<Entry, any Error>] = [:]
    }

    let ttl: TimeInterval
    /// Most entries kept; when full, expired ones go, and if none have, all do.
    let capacity: Int
    private let state = Mutex(State())

    /// `${BFF_PUBLIC_URL}/fhir`: what an entry's rewriter puts in place of the EHR's base.
    let publicFHIRBase: String
    /// `PageBinding.derivedKey` of `BFF_TOKEN_KEY`, then of each fallback.
    private let pageKeys: [[UInt8]]

    init(ttl: TimeInterval, publicFHIRBase: String, tokenKeys: [[UInt8]], capacity: Int = 10_000) {
        self.ttl = ttl
        self.publicFHIRBase = publicFHIRBase
        pageKeys = tokenKeys.map(PageBinding.derivedKey)
        self.capacity = capacity
    }

    /// The fresh entry for `key`, or nil.
    func entry(for key: Key, now: Date) -> Entry? {
        guard ttl > 0 else { return nil }
        return state.withLock { state in
            guard let entry = state.entries[key] else { return nil }
            guard isFresh(entry, now: now) else {
                state.entries[key] = nil
                return nil
            }
            return entry
        }
    }

    /// The fresh entry for `key`, or else the result of `load(generation)`, which should
    /// query the database and `store` what it read with that generation. Concurrent misses
    /// of one key share one `load` (its entry or its error): when the entry of a session in
    /// heavy use expires, one query runs, not one per request in flight. A miss after an
    /// invalidation never joins a lookup that began before it. With `ttl` 0 every call loads.
    func entry(for key: Key, now: Date, load: @escaping @Sendable (_ generation: UInt64) async throws -> Entry) async throws -> Entry {
        guard ttl > 0 else { return try await load(generation) }
        if let entry = entry(for: key, now: now) { return entry }
        let lookup: Task<Entry, any Error> = state.withLock { state in
            if let running = state.loading[key] { return running }
            let generation = state.generation
            let running = Task { try await load(generation) }
            state.loading[key] = running
            return running
        }
        defer { state.withLock { state in if state.loading[key] == lookup { state.loading[key] = nil } } }
        return try await lookup.value
    }

    /// Whether a lookup for `key` is under way (for tests).
    func isLoading(_ key: Key) -> Bool { state.withLock { $0.loading[key] != nil } }

    /// Read before querying the database; pass it to `store`.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Keeps `context` for `key` unless an invalidation happened since `generation` was
    /// read; returns the entry either way.
    @discardableResult
    func store(_ context: ProxyContext, launch: LaunchRecord, for key: Key, generation: UInt64, now: Date) -> Entry {
        let pages = PageBinding(derivedKeys: pageKeys, launchHash: launch.idHash)
        let entry = Entry(context: context, launch: launch, scopes: SMARTScopes(launch.scope),
                          rewriter: URLRewriter(from: launch.iss, to: publicFHIRBase, pages: pages), pages: pages, fetchedAt: now)
        guard ttl > 0 else { return entry }
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.entries.count >= capacity, state.entries[key] == nil {
                state.entries = state.entries.filter { isFresh($0.value, now: now) }
                if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
            }
            state.entries[key] = entry
        }
        return entry
    }

    /// Drops every entry of the launch (its tokens changed or it ended).
    func invalidate(launchHash: String) {
        state.withLock { state in
            state.generation &+= 1
            state.loading.removeAll() // later misses look up afresh
            state.entries = state.entries.filter { $0.value.launch.idHash != launchHash }
        }
    }

    /// Drops every entry of the session (it ended, or gained a launch).
    func invalidate(sessionHash: String) {
        state.withLock { state in
            state.generation &+= 1
            state.loading.removeAll() // later misses look up afresh
            state.entries = state.entries.filter { $0.value.context.session.idHash != sessionHash }
        }
    }

    private func isFresh(_ entry: Entry, now: Date) -> Bool {
        let age = now.timeIntervalSince(entry.fetchedAt)
        return age >= 0 && age < ttl && entry.context.session.expiresAt > now
    }
}
