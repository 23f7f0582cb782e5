import JSON

/// The sandbox's bundled FHIR R4 data set: three patients with vital signs and labs,
/// conditions, medications, an encounter each, and one practitioner. Built in code so it
/// is the same on every run.
struct SandboxData: Sendable {
    let resources: [String: [String: JSONValue]] // type → id → resource

    static let patients: [(id: String, given: String, family: String, birthDate: String, gender: String)] = [
        ("pat-1", "Amy", "Shaw", "1987-02-20", "female"),
        ("pat-2", "Daniel", "Reyes", "1954-11-03", "male"),
        ("pat-3", "Lena", "Okafor", "2012-06-14", "female"),
    ]

    init() {
        var r: [String: [String: JSONValue]] = [:]
        r["Practitioner"] = ["prac-1": [
            "resourceType": "Practitioner", "id": "prac-1",
            "name": [["family": "Moreau", "given": ["Claire"], "prefix": ["Dr."]]],
        ]]
        for (index, p) in SandboxData.patients.enumerated() {
            r["Patient", default: [:]][p.id] = [
                "resourceType": "Patient", "id": .string(p.id), "active": true,
                "name": [["use": "official", "family": .string(p.family), "given": [.string(p.given)]]],
                "gender": .string(p.gender), "birthDate": .string(p.birthDate),
                "generalPractitioner": [["reference": "Practitioner/prac-1"]],
            ]
            let encounterID = "enc-\(index + 1)"
            r["Encounter", default: [:]][encounterID] = [
                "resourceType": "Encounter", "id": .string(encounterID), "status": "in-progress",
                "class": ["system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "AMB"],
                "subject": ["reference": .string("Patient/\(p.id)")],
                "participant": [["individual": ["reference": "Practitioner/prac-1"]]],
            ]
            for k in 0..<25 {
                let id = "obs-\(index + 1)-\(k + 1)"
                r["Observation", default: [:]][id] = SandboxData.observation(id: id, patient: p.id, index: k, seed: index)
            }
            let conditions = [("44054006", "Diabetes mellitus type 2"), ("38341003", "Hypertension")]
            for (k, c) in conditions.enumerated() {
                let id = "cond-\(index + 1)-\(k + 1)"
                r["Condition", default: [:]][id] = [
                    "resourceType": "Condition", "id": .string(id),
                    "clinicalStatus": ["coding": [["system": "http://terminology.hl7.org/CodeSystem/condition-clinical", "code": "active"]]],
                    "code": ["coding": [["system": "http://snomed.info/sct", "code": .string(c.0), "display": .string(c.1)]], "text": .string(c.1)],
                    "subject": ["reference": .string("Patient/\(p.id)")],
                ]
            }
            let medications = [("860975", "Metformin 500 MG Oral Tablet"), ("314076", "Lisinopril 10 MG Oral Tablet")]
            for (k, m) in medications.enumerated() {
                let id = "med-\(index + 1)-\(k + 1)"
                r["MedicationRequest", default: [:]][id] = [
                    "resourceType": "MedicationRequest", "id": .string(id), "status": "active", "intent": "order",
                    "medicationCodeableConcept": ["coding": [["system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": .string(m.0), "display": .string(m.1)]], "text": .string(m.1)],
                    "subject": ["reference": .string("Patient/\(p.id)")],
                    "requester": ["reference": "Practitioner/prac-1"],
                ]
            }
        }
        resources = r
    }

    static func observation(id: String, patient: String, index: Int, seed: Int) -> JSONValue {
        let kinds: [(code: String, display: String, unit: String, base: Double, category: String)] = [
            ("8867-4", "Heart rate", "/min", 72, "vital-signs"),
            ("8310-5", "Body temperature", "Cel", 36.8, "vital-signs"),
            ("29463-7", "Body weight", "kg", 70, "vital-signs"),
            ("2339-0", "Glucose [Mass/volume] in Blood", "mg/dL", 105, "laboratory"),
            ("4548-4", "Hemoglobin A1c/Hemoglobin.total in Blood", "%", 6.4, "laboratory"),
        ]
        let kind = kinds[index % kinds.count]
        let spread = (Double((index * 7 + seed * 3) % 9) - 4) / 100 // ±4 %
        let value = (kind.base * (1 + spread) * 10).rounded() / 10
        let day = 1 + index
        return [
            "resourceType": "Observation", "id": .string(id), "status": "final",
            "category": [["coding": [["system": "http://terminology.hl7.org/CodeSystem/observation-category", "code": .string(kind.category)]]]],
            "code": ["coding": [["system": "http://loinc.org", "code": .string(kind.code), "display": .string(kind.display)]], "text": .string(kind.display)],
            "subject": ["reference": .string("Patient/\(patient)")],
            "effectiveDateTime": .string("2026-10-\(day < 10 ? "0" : "")\(day)T09:00:00Z"),
            "valueQuantity": ["value": .number(value), "unit": .string(kind.unit), "system": "http://unitsofmeasure.org", "code": .string(kind.unit)],
        ]
    }

    /// The patient a resource belongs to (its own id for a Patient, else its subject), or
    /// nil for resources outside any patient's compartment (Practitioner).
    static func patient(of resource: JSONValue) -> String? {
        if resource["resourceType"]?.stringValue == "Patient" { return resource["id"]?.stringValue }
        guard let reference = resource["subject"]?["reference"]?.stringValue, reference.hasPrefix("Patient/") else { return nil }
        return String(reference.dropFirst("Patient/".count))
    }

    /// Resources of `type` whose subject (or id, for Patient) matches `patient`.
    func search(_ type: String, patient: String?, category: String?, id: String?) -> [JSONValue] {
        let all = (resources[type] ?? [:]).sorted { $0.key.localizedStandardCompare($1.key) == .orderedAscending }.map(\.value)
        return all.filter { resource in
            if let id, resource["id"]?.stringValue != id { return false }
            if let patient {
                let ref = resource["subject"]?["reference"]?.stringValue
                if type == "Patient" { if resource["id"]?.stringValue != patient { return false } } else if ref != "Patient/\(patient)" { return false }
            }
            if let category {
                let code = category.split(separator: "|").last.map(String.init) ?? category
                let codes = resource["category"]?.arrayValue?.flatMap { $0["coding"]?.arrayValue ?? [] }.compactMap { $0["code"]?.stringValue } ?? []
                if !codes.contains(code) { return false }
            }
            return true
        }
    }
}
