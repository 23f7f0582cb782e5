import BFF
import BFFTesting
import Foundation
import JSON
import PostgresStore
import Sessions
import Testing

@Suite("PHI access audit export")
struct AuditExportTests {
    @Test("audit export writes one AuditEvent line per entry, in the order recorded, a page per write")
    func export() async throws {
        let database = try await TestDatabase.make()
        defer { database.pool.close() }
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        try await database.store.appendAudit((0..<12).map { i in entry("/Patient/\(i)", at: start.addingTimeInterval(Double(i))) })
        var writes: [String] = []
        // No settle time: the entries were stored a moment ago.
        try await AuditEventExport.export(from: database.store, since: nil, settle: .zero, pageSize: 5) { writes.append($0) }
        // A page per write, none over the page size (how the 12 fall into pages depends on
        // how far apart the database stamped them: 5, 5, 2, or more, smaller pages).
        let lines = writes.map { $0.split(separator: "\n").count }
        #expect(lines.count >= 3 && lines.allSatisfy { $0 <= 5 } && lines.reduce(0, +) == 12, "\(lines)")
        for line in writes.joined().split(separator: "\n") {
            #expect(try JSONParser.parse(Array(line.utf8))["resourceType"]?.stringValue == "AuditEvent")
        }
        #expect(try Self.paths(writes.joined()) == (0..<12).map { "/Patient/\($0)" })
    }

    @Test("an entry stored after an export, for a read made 30 s before that export's bound, is in the next export from the bound it returned")
    func entryStoredLate() async throws {
        let database = try await TestDatabase.make()
        defer { database.pool.close() }
        let store = database.store
        try await store.appendAudit([entry("/Patient/early", at: Date().addingTimeInterval(-900))])
        try await database.pool.query("UPDATE audit_events SET recorded_at = recorded_at - interval '10 minutes'") // long settled
        var first = ""
        let bound = try await AuditEventExport.export(from: store, since: AuditInstant(Date().addingTimeInterval(-3_600))) { first += $0 }
        #expect(try Self.paths(first) == ["/Patient/early"])
        let now = try await store.auditClock()
        #expect(bound <= now - AuditEventExport.settle && bound > now - .seconds(600), "\(bound) against the database's \(now)")

        // The read was made 30 s before the bound; its entry is stored after the export ran
        // (the body took long, or the database was away): here, stamped at the bound itself,
        // the first instant the export left out.
        try await store.appendAudit([entry("/Patient/late", at: bound.date.addingTimeInterval(-30))])
        try await database.pool.query("UPDATE audit_events SET recorded_at = \(bound.iso8601)::timestamptz WHERE path = '/Patient/late'")
        var second = ""
        let next = try await AuditEventExport.export(from: store, since: bound) { second += $0 }
        #expect(try Self.paths(second) == ["/Patient/late"])
        #expect(next > bound)
        // The AuditEvent's `recorded` is still when the read was made (to the millisecond).
        let recorded = try JSONParser.parse(Array(second.utf8.dropLast()))["recorded"]?.stringValue.flatMap { AuditInstant(iso8601: $0) }
        let read = AuditInstant(bound.date.addingTimeInterval(-30))
        #expect(recorded.map { abs($0.microsecondsSince1970 - read.microsecondsSince1970) < 1_000 } == true, "\(String(describing: recorded)), read at \(read)")
    }

    @Test("entries stored within the settle time are left out, and delivered once by a later export from the bound")
    func settleTime() async throws {
        let database = try await TestDatabase.make()
        defer { database.pool.close() }
        let store = database.store
        let since = AuditInstant(Date().addingTimeInterval(-3_600))
        try await store.appendAudit([entry("/Patient/just-stored", at: Date())]) // stamped now by the database
        var first = ""
        let bound = try await AuditEventExport.export(from: store, since: since) { first += $0 }
        #expect(first.isEmpty, "an entry stored a moment ago was exported: its COPY's neighbours might not be committed yet")

        // The next run, once the settle time has passed: the same, with the clock 2 minutes on.
        var later = ""
        let next = try await AuditEventExport.export(from: store, since: bound, settle: .zero) { later += $0 }
        #expect(try Self.paths(later) == ["/Patient/just-stored"])
        var again = ""
        try await AuditEventExport.export(from: store, since: next, settle: .zero) { again += $0 }
        #expect(again.isEmpty, "delivered twice")
    }

    @Test("an export whose output cannot take it (a full disk) ends with one clear line and exit 1, and prints no next --since to resume from")
    func exportToFullOutput() async throws {
        let database = try await TestDatabase.make()
        defer { database.pool.close() }
        try await database.store.appendAudit([entry("/Patient/a", at: Date())])
        // Stored 10 minutes ago: past the 2 minutes an export leaves to writes still committing.
        try await database.pool.query("UPDATE audit_events SET recorded_at = now() - interval '10 minutes'")
        let executable = SmartBFFProcess.executable
        let errors = NSTemporaryDirectory() + "smart-bff-export-errors-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: errors) }
        let process = try ChildProcess(executable.path, ["audit", "export"],
                                       environment: ["DATABASE_URL": database.url, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"],
                                       outputPath: "/dev/full", errorPath: errors)
        let status = try await runBlocking { process.waitUntilExit() }
        let text = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        #expect(status == 1, "\(text)")
        #expect(text.contains("cannot write the export to standard output"), "\(text)")
        #expect(!text.contains("next --since") && !text.contains("Fatal error"), "\(text)")
    }

    @Test("an export from a database smart-bff never migrated says to migrate it, in one line, exit 1")
    func exportFromAnUnmigratedDatabase() async throws {
        let url = try await PostgresCluster.shared().createDatabase() // empty: no migration applied
        let errors = NSTemporaryDirectory() + "smart-bff-export-errors-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: errors) }
        let process = try ChildProcess(SmartBFFProcess.executable.path, ["audit", "export"],
                                       environment: ["DATABASE_URL": url, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"],
                                       outputPath: "/dev/null", errorPath: errors)
        let status = try await runBlocking { process.waitUntilExit() }
        let text = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        #expect(status == 1, "\(text)")
        #expect(text == "smart-bff: DATABASE_URL names a database with no audit trail: run `smart-bff migrate` on it first (or point DATABASE_URL at smart-bff's database)\n")
    }

    @Test("--since takes the printed bound back exactly, fractions of a second included, and the forms it took before")
    func sinceParsing() async throws {
        let micros = { (text: String) in AuditInstant(iso8601: text)?.microsecondsSince1970 }
        #expect(micros("2026-11-25T16:40:00.123456Z") == 1_795_624_800_123_456)
        #expect(micros("2026-11-25T16:40:00.5Z") == 1_795_624_800_500_000)
        #expect(micros("2026-11-25T17:40:00.000001+01:00") == 1_795_624_800_000_001)
        #expect(micros("2026-11-25T16:40:00.1234569Z") == 1_795_624_800_123_456) // beyond the microsecond: dropped
        #expect(micros("2026-11-25T16:40:00Z") == 1_795_624_800_000_000)
        #expect(micros("2026-11-25T17:40:00+01:00") == 1_795_624_800_000_000)
        // Impossible dates and times are refused, not rolled over (February 30th to March 2nd).
        #expect(micros("2028-02-29T00:00:00Z") != nil)
        #expect(micros("0001-01-01T00:00:00Z") == -62_135_596_800_000_000)
        // The calendar it prints (proleptic Gregorian) is the one it reads, before 1582 too.
        #expect(AuditInstant(iso8601: "1000-03-01T12:00:00Z")?.iso8601 == "1000-03-01T12:00:00.000000Z")
        #expect(micros("2026-11-25T16:40:60Z") == nil) // no leap second
        for bad in ["2026-11-25T16:40:00.Z", "2026-11-25 16:40", "yesterday", "2026-11-25T16:40:00.12a3Z", "",
                    "2030-02-30T00:00:00Z", "2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-13-01T00:00:00Z",
                    "2026-04-31T00:00:00.5Z", "2026-11-25T24:00:00Z", "2026-11-25T16:60:00Z",
                    // Only a zone may follow: nothing after it, and no offset past 23:59.
                    "2099-01-01T00:00:00Zjunk", "2099-01-01T00:00:00+25:00", "2099-01-01T00:00:00+01:60", "2099-01-01T00:00:00",
                    "2099-01-01T00:00:00+0100", "2099-01-01T00:00:00.5Z ",
                    // A fraction only right after the seconds.
                    "2026-11-01T00:00:00Z.5", "2026-11-01T00.5:00:00Z", "2026-11-01T00:00:00+01:00.5", "2026-11-01T00:00:00.5.5Z",
                    // No year 0, which PostgreSQL refuses (it was a database error, exit 1).
                    "0000-01-01T00:00:00Z", "0001-01-01T00:30:00+01:00"] {
            #expect(AuditInstant(iso8601: bad) == nil, "\(bad)")
        }
        let printed = AuditInstant(microsecondsSince1970: 1_795_624_800_123_456)
        #expect(printed.iso8601 == "2026-11-25T16:40:00.123456Z")
        #expect(AuditInstant(microsecondsSince1970: 0).iso8601 == "1970-01-01T00:00:00.000000Z")
        #expect(AuditInstant(microsecondsSince1970: -1).iso8601 == "1969-12-31T23:59:59.999999Z")
        #expect(AuditInstant(microsecondsSince1970: 951_782_400_000_000).iso8601 == "2000-02-29T00:00:00.000000Z")

        // Against the trail, to the microsecond: two entries stamped a microsecond apart.
        let database = try await TestDatabase.make()
        defer { database.pool.close() }
        try await database.store.appendAudit([entry("/Patient/a", at: Date()), entry("/Patient/b", at: Date())])
        try await database.pool.query("""
            UPDATE audit_events SET recorded_at = timestamptz '2026-11-25 16:40:00.123455+00' + CASE path WHEN '/Patient/a' THEN interval '0' ELSE interval '1 microsecond' END
            """)
        var lines = ""
        try await AuditEventExport.export(from: database.store, since: AuditInstant(iso8601: "2026-11-25T16:40:00.123456Z")) { lines += $0 }
        #expect(try Self.paths(lines) == ["/Patient/b"])
    }

    @Test("a read by a launch without openid (no sub, no patient) exports as valid FHIR: no empty string, and the agent is the launch")
    func readWithoutUser() async throws {
        let database = try await TestDatabase.make()
        defer { database.pool.close() }
        try await database.store.appendAudit([
            AuditEntry(at: Date(), launchHash: "launch-hash-1", iss: "https://ehr.example/fhir", sub: "", fhirUser: "", patient: "",
                       method: "GET", pathAndQuery: "/Observation?code=1234-5", upstreamStatus: 200, bytes: 17),
        ])
        var lines = ""
        try await AuditEventExport.export(from: database.store, since: nil, settle: .zero) { lines += $0 }
        let events = try lines.split(separator: "\n").map { try JSONParser.parse(Array($0.utf8)) }
        #expect(events.count == 1)
        for event in events {
            #expect(Self.emptyStrings(in: event).isEmpty, "empty strings at \(Self.emptyStrings(in: event))")
            let who = event["agent"]?.arrayValue?.first?["who"]
            #expect(who?["identifier"]?["system"]?.stringValue == AuditEventExport.launchIdentifierSystem)
            #expect(who?["identifier"]?["value"]?.stringValue == "launch-hash-1")
            #expect(who?["display"]?.stringValue?.isEmpty == false)
            let references = event["entity"]?.arrayValue?.compactMap { $0["what"]?["reference"]?.stringValue } ?? []
            #expect(references.isEmpty, "a patient entity for no patient: \(references)")
        }
    }

    private func entry(_ path: String, at: Date) -> AuditEntry {
        AuditEntry(at: at, launchHash: "launch-hash", iss: "https://ehr.example/fhir", sub: "practitioner-1", fhirUser: nil,
                   patient: "pat-1", method: "GET", pathAndQuery: path, upstreamStatus: 200, bytes: 1398)
    }

    /// The path and query of each AuditEvent in `ndjson`, in order.
    static func paths(_ ndjson: String) throws -> [String] {
        try ndjson.split(separator: "\n").map { line in
            try JSONParser.parse(Array(line.utf8))["entity"]?.arrayValue?.first?["what"]?["identifier"]?["value"]?.stringValue ?? "?"
        }
    }

    /// The paths (`agent[0].who.identifier.value`) of every empty string in `value`, keys
    /// included: FHIR allows no empty string anywhere.
    static func emptyStrings(in value: JSONValue, at path: String = "") -> [String] {
        switch value {
        case let .string(s): return s.isEmpty ? [path] : []
        case let .array(items): return items.enumerated().flatMap { emptyStrings(in: $1, at: path + "[\($0)]") }
        case let .object(members):
            return members.flatMap { key, member in (key.isEmpty ? [path + ".\"\""] : []) + emptyStrings(in: member, at: path + "." + key) }
        default: return []
        }
    }
}

extension AuditExportTests {
    @Test("an entry whose transaction stays open past the settle time (a stalled writer) is not skipped: the bound stops before it, and the next export delivers it")
    func stalledWriter() async throws {
        let database = try await TestDatabase.make()
        defer { database.pool.close() }
        let store = database.store
        let since = AuditInstant(Date().addingTimeInterval(-3_600))
        let inserted = Counter(), commit = Counter()
        let writer = Task {
            try await database.pool.withTransaction { c in
                try await c.query("""
                    INSERT INTO audit_events (at, launch_hash, iss, sub, method, path, upstream_status, bytes)
                    VALUES (now(), 'h', 'https://ehr.example/fhir', 'u', 'GET', '/Patient/stalled', 200, 1)
                    """)
                inserted.increment()
                while commit.current == 0 { try await Task.sleep(for: .milliseconds(20)) }
            }
        }
        while inserted.current == 0 { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(1200)) // the row's stamp is now over a second old
        var first = ""
        let bound = try await AuditEventExport.export(from: store, since: since, settle: .seconds(1)) { first += $0 }
        #expect(first.isEmpty)
        commit.increment()
        try await writer.value
        var second = ""
        _ = try await AuditEventExport.export(from: store, since: bound, settle: .zero) { second += $0 }
        #expect(try Self.paths(second) == ["/Patient/stalled"], "bound \(bound)")
    }

    /// A session left open in a transaction that wrote elsewhere (a forgotten psql, an index
    /// build) holds no audit entry back, and must not hold the export's bound back with it.
    @Test("a transaction left open that writes no audit entry does not hold the export back")
    func openTransactionElsewhere() async throws {
        let database = try await TestDatabase.make()
        defer { database.pool.close() }
        let began = Counter(), end = Counter()
        let other = Task {
            try await database.pool.withTransaction { c in
                try await c.query("CREATE TEMPORARY TABLE scratch (x int)")
                try await c.query("INSERT INTO scratch VALUES (1)")
                began.increment()
                while end.current == 0 { try await Task.sleep(for: .milliseconds(20)) }
            }
        }
        defer { end.increment() }
        let deadline = ContinuousClock.now + .seconds(30) // a no-hang limit only
        while began.current == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        try #require(began.current == 1, "the transaction did not begin")
        try await Task.sleep(for: .milliseconds(1200)) // the transaction is now over a second old
        try await database.store.appendAudit([entry("/Patient/meanwhile", at: Date())]) // stamped after it began
        var lines = ""
        try await AuditEventExport.export(from: database.store, since: nil, settle: .zero) { lines += $0 }
        #expect(try Self.paths(lines) == ["/Patient/meanwhile"])
        end.increment()
        try await other.value
    }
}
