import Foundation
import Sessions

extension PostgresSessionStore {
    /// Reads the trail in the order recorded, (recorded_at, at, id), by keyset: each query
    /// starts after the last entry delivered, so that no entry is skipped or repeated.
    ///
    /// `recorded_at` has a BRIN index (migration 0004), not a B-tree: a query reads every row
    /// of the block ranges that may hold its time range, and sorts them. One query from the
    /// last entry to `until` for each page would read the rest of the export again for every
    /// page (quadratic: an hour of reads at 8 000 a second is 29 million rows, 5 760 pages).
    /// So each query covers a window of time as long as the previous full page took (about a
    /// page of rows at the same pace), doubled after a window that held less than a page; the
    /// first query, knowing nothing yet, covers everything up to `until`, once.
    ///
    /// A page recorded at a single instant may be followed by more at that instant than a
    /// window should sort: every entry stored before migration 0004 has the migration's time,
    /// and since 0007 the entries of one `COPY` share its start (up to a writer's batch).
    /// The rest of that instant is read by the primary key (at, id), which orders entries
    /// within an instant for this reason.
    public func forEachAuditPage(recordedSince since: AuditInstant?, before until: AuditInstant, pageSize: Int,
                                 _ body: ([AuditEntry]) async throws -> Void) async throws {
        let limit = max(1, pageSize)
        var from = since // the window's start; nil: the trail's first entry
        var after: AuditKey? // the last entry delivered, when recorded at `from`
        var span: Int64? // the window's length in microseconds; nil: up to `until`
        while true {
            let to = from.flatMap { from in span.map { min(until, AuditInstant(microsecondsSince1970: from.microsecondsSince1970 + $0)) } } ?? until
            let page = try await auditPage(from: from, after: after, before: to, limit: limit)
            if !page.isEmpty { try await body(page.map(\.entry)) }
            guard page.count == limit, let first = page.first?.key, let last = page.last?.key else {
                if to >= until { return }
                (from, after, span) = (to, nil, min(2 * (span ?? 1), Self.longestAuditWindow))
                continue
            }
            if first.recordedAt == last.recordedAt {
                try await forEachAuditPage(recordedAt: last, limit: limit, body)
                (from, after) = (AuditInstant(microsecondsSince1970: last.recordedAt.microsecondsSince1970 + 1), nil)
            } else {
                (from, after, span) = (last.recordedAt, last, max(1, last.recordedAt.microsecondsSince1970 - first.recordedAt.microsecondsSince1970))
            }
        }
    }

    /// The database's clock, or the start of the oldest transaction in this database that
    /// has written (holds an xid), writes to the audit trail (holds or waits for its row
    /// lock) and has not ended, if earlier. An entry is stamped after its transaction began,
    /// so every entry stamped before this instant is committed or will never be: a bound that
    /// holds even when a writer stalls longer than the export's settle time. Other
    /// transactions (a session left idle in one, an index build) do not hold it back; a
    /// writer's `COPY` stamps its rows a moment before it takes the lock, which the export's
    /// settle time covers. smart-bff's own connections (one role) see each other's
    /// transactions in `pg_stat_activity` and their locks in `pg_locks`.
    public func auditClock() async throws -> AuditInstant {
        let rows = try await pool.query("""
            SELECT (extract(epoch from least(clock_timestamp(), (
                SELECT min(a.xact_start) FROM pg_stat_activity a
                WHERE a.datname = current_database() AND a.backend_xid IS NOT NULL AND a.pid <> pg_backend_pid()
                  AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'relation'
                              AND l.relation = 'audit_events'::regclass AND l.mode = 'RowExclusiveLock')))) * 1000000)::bigint
            """)
        return AuditInstant(microsecondsSince1970: Int64(try rows.first?.int(0) ?? 0))
    }

    /// Sessions on this database whose transactions this role cannot see in
    /// `pg_stat_activity` (another role's, without `pg_read_all_stats`): `auditClock` cannot
    /// hold its bound back for a writer among them that stalls past the export's settle time.
    public func sessionsHiddenFromAuditClock() async throws -> Int {
        try await pool.query("""
            SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = '<insufficient privilege>'
            """).first?.int(0) ?? 0
    }

    /// Where an entry is in the export's order, to the microsecond (exact, where epoch seconds
    /// in a Double are not, which would make a cursor land beside its entry).
    struct AuditKey {
        var recordedAt: AuditInstant
        var at: AuditInstant
        var id: Int64
    }

    /// A window longer than this (35 years) is as good as any.
    static let longestAuditWindow: Int64 = 1 << 50

    /// Up to `limit` entries recorded in [from, to), after `after` (recorded at `from`), in order.
    private func auditPage(from: AuditInstant?, after: AuditKey?, before to: AuditInstant, limit: Int) async throws -> [(entry: AuditEntry, key: AuditKey)] {
        let rows: [PostgresRow]
        if let after {
            rows = try await pool.query("""
                SELECT \(raw: Self.auditColumns) FROM audit_events
                WHERE recorded_at >= \(after.recordedAt.iso8601)::timestamptz AND recorded_at < \(to.iso8601)::timestamptz
                  AND (recorded_at, at, id) > (\(after.recordedAt.iso8601)::timestamptz, \(after.at.iso8601)::timestamptz, \(after.id)::bigint)
                ORDER BY recorded_at, at, id LIMIT \(limit)
                """)
        } else {
            rows = try await pool.query("""
                SELECT \(raw: Self.auditColumns) FROM audit_events
                WHERE recorded_at >= \(from?.iso8601 ?? "-infinity")::timestamptz AND recorded_at < \(to.iso8601)::timestamptz
                ORDER BY recorded_at, at, id LIMIT \(limit)
                """)
        }
        return try rows.map(Self.auditEntry)
    }

    /// Every page of the entries recorded at `start.recordedAt` after `start`, on the primary
    /// key (at, id): each page an index range scan, however many share the instant.
    private func forEachAuditPage(recordedAt start: AuditKey, limit: Int, _ body: ([AuditEntry]) async throws -> Void) async throws {
        var after = start
        while true {
            let rows = try await pool.query("""
                SELECT \(raw: Self.auditColumns) FROM audit_events
                WHERE recorded_at = \(start.recordedAt.iso8601)::timestamptz
                  AND (at, id) > (\(after.at.iso8601)::timestamptz, \(after.id)::bigint)
                ORDER BY at, id LIMIT \(limit)
                """)
            let page = try rows.map(Self.auditEntry)
            if !page.isEmpty { try await body(page.map(\.entry)) }
            guard page.count == limit, let last = page.last?.key else { return }
            after = last
        }
    }

    private static let auditColumns = """
        id, extract(epoch from at), launch_hash, iss, sub, fhir_user, patient, method, path, upstream_status, bytes, text_escaped,
        (extract(epoch from at) * 1000000)::bigint, (extract(epoch from recorded_at) * 1000000)::bigint, broken_off
        """

    private static func auditEntry(_ r: PostgresRow) throws -> (entry: AuditEntry, key: AuditKey) {
        let recordedAt = AuditInstant(microsecondsSince1970: Int64(try r.int(13)))
        let entry = AuditEntry(id: Int64(try r.int(0)), at: try r.date(1), launchHash: try r.string(2), iss: try r.string(3), sub: try r.string(4),
                               fhirUser: r[5], patient: r[6], method: try r.string(7), pathAndQuery: try r.string(8),
                               upstreamStatus: try r.int(9), bytes: Int64(try r.int(10)), textEscaped: try r.bool(11), brokenOff: try r.bool(14), recordedAt: recordedAt)
        return (entry, AuditKey(recordedAt: recordedAt, at: AuditInstant(microsecondsSince1970: Int64(try r.int(12))), id: Int64(try r.int(0))))
    }
}
