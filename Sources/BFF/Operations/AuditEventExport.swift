import Foundation
import JSON
import Sessions

/// FHIR R4 `AuditEvent` resources for the PHI access trail.
public enum AuditEventExport {
    /// Writes the entries recorded at or after `since` as NDJSON, one `AuditEvent` per line,
    /// handing `write` one page of lines at a time (memory stays bounded by the page, whatever
    /// the trail's length). Stops at entries recorded `settle` ago, and returns that bound:
    /// the `since` of the next export, which delivers every entry after it exactly once.
    ///
    /// An entry is selected by when it was stored (`recordedAt`), not by `at`, the time of
    /// the read it records: the entry is stored after the response body, and after retries
    /// while the database was away, so an export by `at` would never deliver an entry
    /// stored after the previous run with an `at` before it.
    @discardableResult
    public static func export(from store: any SessionStore, since: AuditInstant?, settle: Duration = settle, pageSize: Int = 5_000,
                              write: (String) throws -> Void) async throws -> AuditInstant {
        let bound = try await store.auditClock() - settle
        let until = since.map { max($0, bound) } ?? bound // never before `since`: the next run starts where this one asked to
        let formatter = recordedFormatter() // one for the export: making one per entry was 45% of its CPU
        try await store.forEachAuditPage(recordedSince: since, before: until, pageSize: pageSize) { page in
            var lines = ""
            for entry in page { lines += auditEvent(entry, formatter: formatter).serialized() + "\n" }
            try write(lines)
        }
        return until
    }

    /// How far behind the database's clock an export stops: longer than an entry can wait
    /// between its stamp (`recordedAt`: when the `COPY` that wrote it began) and its commit, so
    /// that every entry before the bound is visible when the export reads.
    /// - The writer keeps a `COPY` open 200 ms (`AuditWriter.Timing.interval`), then commits
    ///   at once: a row is normally committed within about 200 ms of its stamp.
    /// - The transaction's `statement_timeout` of 60 s (`PostgresSessionStore.auditLimits(lockWait:)`)
    ///   cancels a `COPY` open longer (a backlog, a slow disk): its rows are rolled back and
    ///   written again later, with new stamps. So a committed row's `COPY` ended less than
    ///   60 s after its stamp.
    /// - The `COMMIT` takes milliseconds; only a synchronous standby that does not answer
    ///   holds it, and the same 60 s limit ends that wait.
    /// - The rare rewrite of a batch the database refused adds a few `COPY`s of at most
    ///   2 000 rows, milliseconds each, to the transaction.
    /// 2 minutes is 600 times the usual wait, twice the longest `COPY`, and as long as the
    /// longest `COPY` and the longest `COMMIT` together.
    public static let settle: Duration = .seconds(120)

    /// How `recorded` is written: RFC 3339 in UTC, with milliseconds.
    public static func recordedFormatter() -> ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }

    /// The entry as an AuditEvent. The read's object is named under the EHR's base (`iss`,
    /// the system of its identifier; the patient as an absolute reference), so that a trail
    /// of several EHRs says which one each read went to. A search or an operation is action
    /// `E` (AuditEventAction: "perform a query/search operation"), a read `R`; a query is
    /// also in `entity.query`, base64 as FHIR has it.
    public static func auditEvent(_ e: AuditEntry, formatter: ISO8601DateFormatter = recordedFormatter()) -> JSONValue {
        var agent: JSONValue = ["type": ["coding": [["system": "http://terminology.hl7.org/CodeSystem/v3-ParticipationType", "code": "IRCP", "display": "information recipient"]]],
                                "who": who(e), "requestor": true]
        if let fhirUser = e.fhirUser, !fhirUser.isEmpty { agent = agent.setting("altId", .string(fhirUser)) }
        var object: JSONValue = ["what": ["identifier": ["system": .string(e.iss), "value": .string(e.pathAndQuery)]],
                                 "type": ["system": "http://terminology.hl7.org/CodeSystem/audit-entity-type", "code": "2", "display": "System Object"],
                                 "detail": [["type": "launch", "valueString": .string(e.launchHash)], ["type": "method", "valueString": .string(e.method)],
                                            ["type": "bytes", "valueString": .string(String(e.bytes))]]]
        let path = e.pathAndQuery.prefix { $0 != "?" } // stored as "/path?query"
        if path.endIndex < e.pathAndQuery.endIndex {
            let query = e.pathAndQuery[e.pathAndQuery.index(after: path.endIndex)...]
            if !query.isEmpty { object = object.setting("query", .string(Data(query.utf8).base64EncodedString())) }
        }
        var entities: [JSONValue] = [object]
        if let patient = e.patient, !patient.isEmpty { // "Patient/" would name no one
            entities.append(["what": ["reference": .string(e.iss + "/Patient/" + patient)],
                             "type": ["system": "http://terminology.hl7.org/CodeSystem/audit-entity-type", "code": "1", "display": "Person"]])
        }
        let interaction = FHIRInteraction(path: String(path.dropFirst()))
        var event: JSONValue = [
            "resourceType": "AuditEvent", "id": .string(String(e.id ?? 0)),
            "type": ["system": "http://terminology.hl7.org/CodeSystem/audit-event-type", "code": "rest", "display": "RESTful Operation"],
            "subtype": [["system": "http://hl7.org/fhir/restful-interaction", "code": .string(interaction.code)]],
            "action": .string(interaction.isRead ? "R" : "E"), "recorded": .string(formatter.string(from: e.at)),
            "outcome": .string(e.brokenOff ? "8" : outcome(upstreamStatus: e.upstreamStatus)),
            "outcomeDesc": .string(outcomeDescription(e)),
            "agent": [agent],
            "source": ["observer": ["display": "smart-bff"], "type": [["system": "http://terminology.hl7.org/CodeSystem/security-source-type", "code": "4", "display": "Application Server"]]],
            "entity": .array(entities),
        ]
        if e.textEscaped {
            // The database refused this entry's text as it was: it is percent-escaped (UTF-8
            // bytes outside printable ASCII, and `%` itself), to be decoded before use.
            event = event.setting("extension", [["url": .string(AuditEventExport.textEscapedExtension), "valueBoolean": true]])
        }
        return event
    }

    /// The agent: the user as the EHR's OpenID provider names them (`sub` under `iss`), or,
    /// for a launch without `openid` (stored with `sub` ""), the launch itself, since FHIR
    /// forbids an empty string and the trail must still say who read.
    static func who(_ e: AuditEntry) -> JSONValue {
        if !e.sub.isEmpty { return ["identifier": ["system": .string(e.iss), "value": .string(e.sub)]] }
        return ["identifier": ["system": .string(launchIdentifierSystem), "value": .string(e.launchHash)],
                "display": "no user identified (launch without openid)"]
    }

    /// The identifier system of launches in the trail: the value is the launch's hash (as in
    /// the entity's `launch` detail).
    public static let launchIdentifierSystem = "https://smart-bff.dev/fhir/launch-sha256"

    /// What the EHR answered, and whether the browser got it whole.
    static func outcomeDescription(_ e: AuditEntry) -> String {
        guard e.upstreamStatus != 0 else { return "no answer from the EHR" }
        let answer = "upstream HTTP \(e.upstreamStatus)"
        return e.brokenOff ? answer + "; the response broke off, \(e.bytes) bytes passed on" : answer
    }

    /// AuditEvent.outcome (a read whose response broke off is a serious failure whatever the
    /// EHR's status): success below 400, minor failure for 4xx, serious failure for
    /// 5xx and for no answer at all (status 0).
    static func outcome(upstreamStatus status: Int) -> String {
        switch status {
        case 1..<400: "0"
        case 400..<500: "4"
        default: "8"
        }
    }

    /// Marks an AuditEvent whose text fields are percent-escaped.
    public static let textEscapedExtension = "https://smart-bff.dev/fhir/StructureDefinition/audit-text-percent-escaped"
}
