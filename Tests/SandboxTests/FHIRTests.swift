import Foundation
import HTTPClient
import JSON
import Sandbox
import Testing

@Suite("Sandbox FHIR server")
struct FHIRTests {
    /// Runs `body` with a sandbox and an access token for `patient`.
    private func withToken(scope: String = "launch openid fhirUser patient/*.rs offline_access", patient: String = "pat-1",
                           _ body: (SandboxHarness, _ get: @Sendable (String, [(String, String)]) async throws -> HTTPClientResponse) async throws -> Void)
        async throws {
        try await SandboxHarness.with { h in
            let token = try #require(try await h.accessTokens(patient: patient, scope: scope)["access_token"]?.stringValue)
            try await body(h) { path, headers in
                try await h.get(h.sandbox.fhirBaseURL + path, headers: [("Authorization", "Bearer " + token)] + headers)
            }
        }
    }

    @Test("Without a valid bearer token: 401 OperationOutcome")
    func unauthorized() async throws {
        try await SandboxHarness.with { h in
            for headers in [[], [("Authorization", "Bearer made-up")], [("Authorization", "Basic eDp5")]] {
                let response = try await h.get(h.sandbox.fhirBaseURL + "/Patient/pat-1", headers: headers)
                #expect(response.status == 401 && response.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
                #expect(try SandboxHarness.json(response)["resourceType"]?.stringValue == "OperationOutcome")
            }
        }
    }

    @Test("Read: the resource with ETag and Last-Modified; If-None-Match gives 304; unknown ids 404 OperationOutcome")
    func read() async throws {
        try await withToken { h, get in
            let response = try await get("/Patient/pat-1", [])
            #expect(response.status == 200)
            #expect(response.header("Content-Type")?.hasPrefix("application/fhir+json") == true)
            let etag = try #require(response.header("ETag"))
            #expect(etag == "W/\"1\"" && response.header("Last-Modified")?.hasSuffix("GMT") == true)
            let patient = try SandboxHarness.json(response)
            #expect(patient["resourceType"]?.stringValue == "Patient" && patient["id"]?.stringValue == "pat-1")
            #expect(patient["birthDate"]?.stringValue?.count == 10 && patient["name"]?.arrayValue?.isEmpty == false)

            let cached = try await get("/Patient/pat-1", [("If-None-Match", etag)])
            #expect(cached.status == 304 && cached.body.isEmpty && cached.header("ETag") == etag)
            #expect(try await get("/Patient/pat-1", [("If-None-Match", "W/\"2\"")]).status == 200)

            let missing = try await get("/Patient/nobody", [])
            #expect(try missing.status == 404 && (SandboxHarness.json(missing))["resourceType"]?.stringValue == "OperationOutcome")
            #expect(try await get("/Unknown", []).status == 404)
            #expect(try await get("/Practitioner/prac-1", []).status == 200)
        }
    }

    @Test("Paging through Observations returns each of the patient's Observations exactly once", arguments: [1, 7, 10, 25, 50])
    func paging(count: Int) async throws {
        try await withToken { h, get in
            let base = h.sandbox.fhirBaseURL
            var next: String? = "/Observation?patient=pat-1&_count=\(count)"
            var ids: [String] = [], pages = 0, total: Int?
            while let path = next {
                let response = try await get(path, [])
                #expect(response.status == 200 && response.header("Content-Type")?.hasPrefix("application/fhir+json") == true)
                let bundle = try SandboxHarness.json(response)
                #expect(bundle["resourceType"]?.stringValue == "Bundle" && bundle["type"]?.stringValue == "searchset")
                total = bundle["total"]?.intValue
                let links = bundle["link"]?.arrayValue ?? []
                let url = { (relation: String) in links.first { $0["relation"]?.stringValue == relation }?["url"]?.stringValue }
                #expect(url("self")?.hasPrefix(base + "/Observation?") == true)
                if pages > 0 { #expect(url("previous")?.hasPrefix(base + "/Observation?") == true) } else { #expect(url("previous") == nil) }
                for entry in bundle["entry"]?.arrayValue ?? [] {
                    let id = try #require(entry["resource"]?["id"]?.stringValue)
                    #expect(entry["fullUrl"]?.stringValue == base + "/Observation/" + id)
                    #expect(entry["resource"]?["subject"]?["reference"]?.stringValue == "Patient/pat-1")
                    ids.append(id)
                }
                pages += 1
                next = url("next").map { next in
                    #expect(next.hasPrefix(base + "/"))
                    return String(next.dropFirst(base.count))
                }
                if pages > 100 { break }
            }
            #expect(ids.count == 25 && Set(ids).count == 25 && total == 25)
            #expect(pages == (25 + count - 1) / count)
        }
    }

    @Test("Search: subject=Patient/X equals patient=X; category splits vitals and labs; Patient?_id; default page size 10")
    func search() async throws {
        try await withToken(scope: "launch openid user/*.rs", patient: "pat-2") { _, get in
            func ids(_ path: String) async throws -> [String] {
                let bundle = try SandboxHarness.json(try await get(path, []))
                return (bundle["entry"]?.arrayValue ?? []).compactMap { $0["resource"]?["id"]?.stringValue }
            }
            let bySubject = try await ids("/Observation?subject=Patient/pat-2&_count=50")
            #expect(try bySubject == (await ids("/Observation?patient=pat-2&_count=50")) && bySubject.count == 25)
            let vitals = try await ids("/Observation?patient=pat-2&category=vital-signs&_count=50")
            let labs = try await ids("/Observation?patient=pat-2&category=http://terminology.hl7.org/CodeSystem/observation-category%7Claboratory&_count=50")
            #expect(!vitals.isEmpty && !labs.isEmpty && Set(vitals + labs) == Set(bySubject) && Set(vitals).isDisjoint(with: labs))
            #expect(try await ids("/Observation?patient=pat-2").count == 10)
            #expect(try await ids("/Patient?_id=pat-3") == ["pat-3"])
            #expect(try await ids("/Condition?patient=pat-2").count >= 1)
            #expect(try await ids("/MedicationRequest?patient=pat-2").count >= 1)
            #expect(try await ids("/Encounter?patient=pat-2") == ["enc-2"])
        }
    }

    @Test("A patient-scoped token sees only its patient")
    func patientBinding() async throws {
        try await withToken(patient: "pat-1") { _, get in
            #expect(try await get("/Patient/pat-2", []).status == 403)
            #expect(try await get("/Observation/obs-2-1", []).status == 403)
            #expect(try await get("/Observation/obs-1-1", []).status == 200)
            #expect(try await get("/Observation?patient=pat-2", []).status == 403)
            #expect(try await get("/Patient?_id=pat-2", []).status == 403)
            let all = try SandboxHarness.json(try await get("/Observation?_count=50", []))
            #expect(all["total"]?.intValue == 25)
        }
    }

    @Test("The sandbox records the FHIR requests it receives, headers included")
    func recordsRequests() async throws {
        try await withToken { h, get in
            await h.sandbox.state.resetCounters()
            _ = try await get("/Patient/pat-1?_format=json", [("X-Probe", "seen")])
            let recorded = try #require(await h.sandbox.state.recentFHIRRequests.last)
            #expect(recorded.method == "GET" && recorded.pathAndQuery == "/fhir/Patient/pat-1?_format=json")
            #expect(recorded.header("x-probe") == "seen" && recorded.header("Authorization")?.hasPrefix("Bearer ") == true)
            #expect(await h.sandbox.state.fhirRequests == 1)
        }
    }
}
