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

    struct Entry: Sendable {
        let context: ProxyContext
        let launch: LaunchRecord
        /// `launch.scope`, parsed once.
        let scopes: SMARTScopes
        let fetchedAt: Date
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        /// Bumped by every invalidation, so that a lookup that raced one does not store what
        /// it read before it.
        var generation: UInt64 = 0
    }

    let ttl: TimeInterval
    /// Most entries kept; when full, expired ones go, and if none have, all do.
    let capacity: Int
    private let state = Mutex(State())

    init(ttl: TimeInterval, capacity: Int = 10_000) {
        self.ttl = ttl
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

    /// Read before querying the database; pass it to `store`.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Keeps `context` for `key` unless an invalidation happened since `generation` was
    /// read; returns the entry either way.
    @discardableResult
    func store(_ context: ProxyContext, launch: LaunchRecord, for key: Key, generation: UInt64, now: Date) -> Entry {
        let entry = Entry(context: context, launch: launch, scopes: SMARTScopes(launch.scope), fetchedAt: now)
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
            state.entries = state.entries.filter { $0.value.launch.idHash != launchHash }
        }
    }

    /// Drops every entry of the session (it ended, or gained a launch).
    func invalidate(sessionHash: String) {
        state.withLock { state in
            state.generation &+= 1
            state.entries = state.entries.filter { $0.value.context.session.idHash != sessionHash }
        }
    }

    private func isFresh(_ entry: Entry, now: Date) -> Bool {
        let age = now.timeIntervalSince(entry.fetchedAt)
        return age >= 0 && age < ttl && entry.context.session.expiresAt > now
    }
}
