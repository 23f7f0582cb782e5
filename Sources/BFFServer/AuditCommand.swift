import ArgumentParser
import BFF
import Cryptography
import Foundation
import PostgresStore

/// `smart-bff audit export [--since TIME]`: the PHI access trail as NDJSON FHIR R4 AuditEvents.
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "audit", abstract: "PHI access audit trail.",
                                                    subcommands: [Export.self])

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "export", abstract: "Write the audit trail as NDJSON FHIR R4 AuditEvent resources.")

        @Option(help: "Only entries at or after this ISO 8601 time (e.g. 2026-11-01T00:00:00Z).") var since: String?

        func run() async throws {
            guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
                FileHandle.standardError.write(Data("smart-bff: configuration error\nDATABASE_URL: required\n".utf8))
                throw ExitCode(78)
            }
            var start: Date?
            if let since {
                guard let date = ISO8601DateFormatter().date(from: since) else { throw ValidationError("--since: expected an ISO 8601 time such as 2026-11-01T00:00:00Z") }
                start = date
            }
            let pool = ConnectionPool(url: url)
            defer { pool.close() }
            // The key is not needed to read the audit trail; any key serves the store here.
            let store = PostgresSessionStore(pool: pool, tokenKey: try AESGCMKey(bytes: SecureRandom.bytes(32)))
            try await AuditEventExport.export(from: store, since: start) { lines in
                FileHandle.standardOutput.write(Data(lines.utf8))
            }
        }
    }
}
