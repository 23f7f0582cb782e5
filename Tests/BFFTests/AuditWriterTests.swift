import BFF
import BFFTesting
import Foundation
import JSON
import Logging
import Sessions
import Testing

@Suite("PHI access audit writer")
struct AuditWriterTests {
    @Test("an entry whose write failed while the database was away is written once it is back, with no later request to trigger it; the status shows it pending meanwhile")
    func failedWriteIsRetriedOnItsOwn() async throws {
        let database = try await TestDatabase.make(poolSize: 2)
        let logs = LogSink()
        let writer = AuditWriter(store: database.store, logger: Logger(label: "audit-test") { JSONLogHandler(label: $0, sink: logs) })

        try await PostgresStoreAdmin.takeAway(database.url)
        writer.record(AuditEntry(at: Date(), launchHash: "launch-hash", iss: "https://ehr.example/fhir", sub: "practitioner-1",
                                 fhirUser: nil, patient: "pat-1", method: "GET", pathAndQuery: "/Patient/pat-1",
                                 upstreamStatus: 200, bytes: 1398))
        let deadline = ContinuousClock.now + .seconds(30)
        while !logs.captured.contains(where: { $0.contains("audit write failed") }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(logs.captured.contains { $0.contains("audit write failed") }, "the write did not fail while the database was away")
        let away = writer.status
        #expect(away.pending == 1 && away.written == 0 && away.failedWrites >= 1, "\(away)")

        // Back, and nothing else happens: the writer must try again by itself.
        try await PostgresStoreAdmin.bringBack(database.url)
        while writer.status.pending > 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(writer.status.pending == 0 && writer.status.written == 1, "\(writer.status)")
        let written = try await database.store.auditEntries(since: nil)
        #expect(written.count == 1, "the entry was lost, or written more than once")
        #expect(written.first?.pathAndQuery == "/Patient/pat-1")
        database.pool.close()
    }
    @Test("audit export writes one AuditEvent line per entry, oldest first, a page per write")
    func export() async throws {
        let database = try await TestDatabase.make()
        defer { database.pool.close() }
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        try await database.store.appendAudit((0..<12).map { i in
            AuditEntry(at: start.addingTimeInterval(Double(11 - i)), launchHash: "h", iss: "https://ehr.example/fhir", sub: "s",
                       fhirUser: nil, patient: "pat-1", method: "GET", pathAndQuery: "/Patient/\(i)", upstreamStatus: 200, bytes: 1)
        })
        var writes: [String] = []
        try await AuditEventExport.export(from: database.store, since: nil, pageSize: 5) { writes.append($0) }
        #expect(writes.count == 3)
        let lines = writes.joined().split(separator: "\n")
        let paths = try lines.map { line -> String? in
            let event = try JSONParser.parse(Array(line.utf8))
            #expect(event["resourceType"]?.stringValue == "AuditEvent")
            return event["entity"]?.arrayValue?.first?["what"]?["identifier"]?["value"]?.stringValue
        }
        #expect(paths == (0..<12).reversed().map { "/Patient/\($0)" })
    }
}
