import ArgumentParser
import BFF
import Cryptography
import Foundation
import PostgresStore
import Sessions

/// `smart-bff audit export [--since TIME]`: the PHI access trail as NDJSON FHIR R4 AuditEvents.
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "audit", abstract: "PHI access audit trail.",
                                                    subcommands: [Export.self])

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "export", abstract: "Write the audit trail as NDJSON FHIR R4 AuditEvent resources.")

        @Option(help: ArgumentHelp("Only entries recorded at or after this ISO 8601 time, to the microsecond (e.g. 2026-11-01T00:00:00Z, or the 'next --since' the previous export printed).",
                                   discussion: "Entries are selected by when they were stored, not by when the read they record was made (the AuditEvent's 'recorded'): an entry is stored after the response and after any retries while the database was away. The export stops at entries stored 2 minutes ago, the longest a write can take to commit, and prints that bound on standard error as 'next --since: TIME'. Running the next export with it delivers every later entry exactly once."))
        var since: String?

        func run() async throws {
            let url = try Resources.databaseURL()
            var start: AuditInstant?
            if let since {
                guard let instant = AuditInstant(iso8601: since) else {
                    throw ValidationError("--since: expected an ISO 8601 time such as 2026-11-01T00:00:00Z or 2026-11-01T00:00:00.123456Z")
                }
                start = instant
            }
            let pool = ConnectionPool(url: url)
            defer { pool.close() }
            // The key is not needed to read the audit trail; any key serves the store here.
            let store = PostgresSessionStore(pool: pool, tokenKey: try AESGCMKey(bytes: SecureRandom.bytes(32)))
            let next: AuditInstant
            do {
                let hidden = try await store.sessionsHiddenFromAuditClock()
                if hidden > 0 {
                    // smart-bff's writes end within their 60 s limits, inside the 2 minutes the
                    // export leaves them; a writer stalled longer would go unseen.
                    FileHandle.standardError.write(Data(("smart-bff: warning: this role cannot see the transactions of \(hidden) other session(s) "
                        + "on the database; run the export as the role smart-bff writes with, or grant it pg_read_all_stats, so that a "
                        + "write stalled past 2 minutes holds the export's bound back\n").utf8))
                }
                next = try await AuditEventExport.export(from: store, since: start) { lines in
                    do {
                        try FileHandle.standardOutput.write(contentsOf: Data(lines.utf8))
                    } catch {
                        throw OutputFailure(cause: error)
                    }
                }
            } catch let error as PostgresError where error.sqlState == "42P01" { // undefined table
                FileHandle.standardError.write(Data("smart-bff: DATABASE_URL names a database with no audit trail: run `smart-bff migrate` on it first (or point DATABASE_URL at smart-bff's database)\n".utf8))
                throw ExitCode(1)
            } catch {
                FileHandle.standardError.write(Data("smart-bff: \(StartupFailure.line(for: error))\n".utf8))
                throw ExitCode(1)
            }
            // Only once everything is written: a failed export prints no bound, and is run
            // again from the same --since.
            FileHandle.standardError.write(Data("next --since: \(next.iso8601)\n".utf8))
        }
    }
}

/// The export's standard output did not take a write (a full disk, a closed file).
struct OutputFailure: Error, CustomStringConvertible {
    let cause: any Error

    var description: String { "cannot write the export to standard output: \((cause as NSError).localizedDescription)" }
}
