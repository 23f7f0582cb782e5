import BFF
import BFFTesting
import Foundation
import JSON
import Sessions
import Testing

@Suite("PHI access audit export")
struct AuditExportTests {
    @Test("a read by a launch without openid (no sub, no patient) exports as valid FHIR: no empty string, and the agent is the launch")
    func readWithoutUser() async throws {
        let database = try await TestDatabase.make()
        defer { database.pool.close() }
        try await database.store.appendAudit([
            AuditEntry(at: Date(), launchHash: "launch-hash-1", iss: "https://ehr.example/fhir", sub: "", fhirUser: "", patient: "",
                       method: "GET", pathAndQuery: "/Observation?code=1234-5", upstreamStatus: 200, bytes: 17),
        ])
        var lines = ""
        try await AuditEventExport.export(from: database.store, since: nil) { lines += $0 }
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
