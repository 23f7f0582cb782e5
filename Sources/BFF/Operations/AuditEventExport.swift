import Foundation
import JSON
import Sessions

/// FHIR R4 `AuditEvent` resources for the PHI access trail.
public enum AuditEventExport {
    /// Writes the trail at or after `since` as NDJSON, one `AuditEvent` per line, handing
    /// `write` one page of lines at a time (memory stays bounded by the page, whatever the
    /// trail's length).
    public static func export(from store: any SessionStore, since: Date?, pageSize: Int = 5_000,
                              write: (String) throws -> Void) async throws {
        try await store.forEachAuditPage(since: since, pageSize: pageSize) { page in
            var lines = ""
            for entry in page { lines += auditEvent(entry).serialized() + "\n" }
            try write(lines)
        }
    }

    public static func auditEvent(_ e: AuditEntry) -> JSONValue {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var agent: JSONValue = ["type": ["coding": [["system": "http://terminology.hl7.org/CodeSystem/v3-ParticipationType", "code": "IRCP", "display": "information recipient"]]],
                                "who": who(e), "requestor": true]
        if let fhirUser = e.fhirUser, !fhirUser.isEmpty { agent = agent.setting("altId", .string(fhirUser)) }
        var entities: [JSONValue] = [["what": ["identifier": ["value": .string(e.pathAndQuery)]],
                                      "type": ["system": "http://terminology.hl7.org/CodeSystem/audit-entity-type", "code": "2", "display": "System Object"],
                                      "detail": [["type": "launch", "valueString": .string(e.launchHash)], ["type": "method", "valueString": .string(e.method)],
                                                 ["type": "bytes", "valueString": .string(String(e.bytes))]]]]
        if let patient = e.patient, !patient.isEmpty { // "Patient/" would name no one
            entities.append(["what": ["reference": .string("Patient/" + patient)],
                             "type": ["system": "http://terminology.hl7.org/CodeSystem/audit-entity-type", "code": "1", "display": "Person"]])
        }
        let interaction = FHIRInteraction(path: String(e.pathAndQuery.prefix { $0 != "?" }.dropFirst())) // stored as "/path?query"
        var event: JSONValue = [
            "resourceType": "AuditEvent", "id": .string(String(e.id ?? 0)),
            "type": ["system": "http://terminology.hl7.org/CodeSystem/audit-event-type", "code": "rest", "display": "RESTful Operation"],
            "subtype": [["system": "http://hl7.org/fhir/restful-interaction", "code": .string(interaction.code)]],
            "action": "R", "recorded": .string(formatter.string(from: e.at)),
            "outcome": .string(outcome(upstreamStatus: e.upstreamStatus)),
            "outcomeDesc": .string(e.upstreamStatus == 0 ? "no answer from the EHR" : "upstream HTTP \(e.upstreamStatus)"),
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

    /// AuditEvent.outcome: success below 400, minor failure for 4xx, serious failure for
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
