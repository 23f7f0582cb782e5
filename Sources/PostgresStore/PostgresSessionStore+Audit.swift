import Foundation
import Sessions

extension PostgresSessionStore {
    /// Stores every entry, or throws and stores none (so that the caller may retry the batch).
    ///
    /// One binary `COPY` in the common case. A value the server refuses (NUL in text, a
    /// character the database's encoding lacks) fails a `COPY` whole, and would fail it again
    /// at every retry while the trail piled up behind it. So a batch refused for its data is
    /// written again in one transaction, halves under savepoints, until each refused entry is
    /// alone; that entry is stored with its text escaped (`escapedForStorage`), which any
    /// server encoding accepts. A refused entry is thus kept, marked by its escapes, and the
    /// rest go in unchanged.
    public func appendAudit(_ entries: [AuditEntry]) async throws {
        guard !entries.isEmpty else { return }
        do {
            let rows = PostgresSessionStore.auditRows(entries[...])
            try await pool.withConnection { connection in
                try await connection.run { try $0.copyIn(PostgresSessionStore.auditCopy, rows: rows) }
            }
        } catch let error as PostgresError where error.isRefusedValue {
            try await pool.withTransaction { connection in
                try await PostgresSessionStore.copyIsolatingRefused(entries[...], on: connection)
            }
        }
    }

    /// Stores entries as they come, in one `COPY`: all of them, or none when it throws. Each
    /// piece `next` returns is sent at once, so the database works on the rows as they come
    /// rather than in one burst at the end; when `next` returns nil, the rows are committed.
    /// A batch refused for its data is written again as `appendAudit(_:)` does.
    ///
    /// The `COPY` lasts as long as the caller sends (200 ms in `AuditWriter`), so its
    /// transaction sets its own limits (`auditLimits`) in place of the server's: a
    /// `statement_timeout` set for every statement (a DBA's `100ms`) would cancel every `COPY`
    /// and hold the whole trail back.
    ///
    /// `batch` (16 random bytes) is stored with the rows (`audit_batches`), for
    /// `settleAuditBatch(_:)`. A `COMMIT` left unanswered throws `AuditCommitUnanswered`.
    public func appendAudit(lockWait: Duration, batch: [UInt8], streaming next: () async -> [AuditEntry]?) async throws {
        let limits = PostgresSessionStore.auditLimits(lockWait: lockWait)
        var sent: [AuditEntry] = []
        do {
            try await pool.withTransaction(limits: limits, commitUnanswered: { AuditCommitUnanswered(cause: $0) }) { connection in
                try await connection.query("INSERT INTO audit_batches (id) VALUES (\(batch))")
                try await connection.run { try $0.beginCopy(PostgresSessionStore.auditCopy) }
                while let piece = await next() {
                    guard !piece.isEmpty else { continue }
                    sent += piece
                    let rows = PostgresSessionStore.auditRows(piece[...])
                    try await connection.run { try $0.sendCopyData(rows) }
                }
                try await connection.run { try $0.endCopy() }
            }
        } catch let error as PostgresError where error.isRefusedValue {
            try await pool.withTransaction(limits: limits, commitUnanswered: { AuditCommitUnanswered(cause: $0) }) { [sent] connection in
                try await connection.query("INSERT INTO audit_batches (id) VALUES (\(batch))")
                try await PostgresSessionStore.copyIsolatingRefused(sent[...], on: connection)
            }
        }
    }

    /// Whether the write of `batch` committed (true), or never will (false): the id is claimed,
    /// in a transaction of its own, so that a commit of that write still under way is waited
    /// for, and none can come later. The claim is marked as one (`claimed`): asked again after
    /// its own answer was lost, the settle finds its claim, not a write, and answers the same.
    public func settleAuditBatch(_ batch: [UInt8]) async throws -> Bool {
        let rows = try await pool.query("""
            INSERT INTO audit_batches (id, claimed) VALUES (\(batch), true)
            ON CONFLICT (id) DO UPDATE SET claimed = audit_batches.claimed RETURNING claimed
            """)
        return try rows.count == 1 && !rows[0].bool(0)
    }

    /// A streamed audit write's own limits: a minute for each statement (far beyond the
    /// 200 ms a `COPY` stays open, and what a large backlog takes), and `lockWait` (under the
    /// minute) to wait for the table's lock, so that a DBA's `VACUUM FULL` or `LOCK TABLE`
    /// makes the write fail and retry rather than hold the writer for its length. Between
    /// its statements the transaction may idle as long as a loaded machine takes to send the
    /// next: a minute, whatever the server's `idle_in_transaction_session_timeout`.
    static func auditLimits(lockWait: Duration) -> String {
        let milliseconds = min(max(lockWait / .milliseconds(1), 1), 59_000)
        return "SET LOCAL statement_timeout = '60s'; SET LOCAL lock_timeout = '\(Int(milliseconds))ms';"
            + " SET LOCAL idle_in_transaction_session_timeout = '60s'"
    }

    /// Audit rows go in with binary `COPY`: at a batch of 200 rows per flush, the many-row
    /// `INSERT` it replaces cost PostgreSQL about 14 µs of CPU per proxied request.
    static let auditCopy = "COPY audit_events (at, launch_hash, iss, sub, fhir_user, patient, method, path, upstream_status, bytes, text_escaped, broken_off) FROM STDIN (FORMAT binary)"

    /// Inside a transaction: copies `entries` under a savepoint; if the server refuses their
    /// values, rolls back to it and copies each half the same way, a lone entry escaped.
    private static func copyIsolatingRefused(_ entries: ArraySlice<AuditEntry>, on connection: PooledConnection) async throws {
        let rows = auditRows(entries)
        do {
            try await connection.run { c in
                try c.executeScript("SAVEPOINT audit_rows")
                do throws(PostgresError) { try c.copyIn(auditCopy, rows: rows) } catch where error.isRefusedValue {
                    try c.executeScript("ROLLBACK TO SAVEPOINT audit_rows")
                    throw error
                }
                try c.executeScript("RELEASE SAVEPOINT audit_rows")
            }
        } catch let error as PostgresError where error.isRefusedValue {
            if entries.count == 1 {
                let escaped = auditRows([entries[entries.startIndex].escapedForStorage()])
                try await connection.run { try $0.copyIn(auditCopy, rows: escaped) }
                return
            }
            let middle = entries.startIndex + entries.count / 2
            try await copyIsolatingRefused(entries[..<middle], on: connection)
            try await copyIsolatingRefused(entries[middle...], on: connection)
        }
    }

    private static func auditRows(_ entries: ArraySlice<AuditEntry>) -> BinaryCopyRows {
        var rows = BinaryCopyRows(reservingCapacity: entries.count * 256)
        for e in entries {
            rows.beginRow(fields: 12)
            rows.append(timestamp: e.at)
            rows.append(e.launchHash)
            rows.append(e.iss)
            rows.append(e.sub)
            rows.append(e.fhirUser)
            rows.append(e.patient)
            rows.append(e.method)
            rows.append(e.pathAndQuery)
            rows.append(int32: Int32(clamping: e.upstreamStatus))
            rows.append(int64: Int64(e.bytes))
            rows.append(bool: e.textEscaped)
            rows.append(bool: e.brokenOff)
        }
        return rows
    }
}

extension AuditEntry {
    /// The entry with every text field percent-encoded outside printable ASCII (and `%`
    /// itself): lossless, readable, and accepted by every server encoding; marked
    /// `textEscaped`, so that readers know to decode it.
    func escapedForStorage() -> AuditEntry {
        var e = self
        e.launchHash = Self.escaped(launchHash)
        e.iss = Self.escaped(iss)
        e.sub = Self.escaped(sub)
        e.fhirUser = fhirUser.map(Self.escaped)
        e.patient = patient.map(Self.escaped)
        e.method = Self.escaped(method)
        e.pathAndQuery = Self.escaped(pathAndQuery)
        e.textEscaped = true
        return e
    }

    static func escaped(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            if byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "%") {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
