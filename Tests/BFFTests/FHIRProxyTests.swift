import BFF
import BFFTesting
import Foundation
import HTTPClient
import JSON
import Sandbox
import Synchronization
import Testing

@Suite("FHIR read proxy")
struct FHIRProxyTests {
    @Test("read, HEAD, conditional read (304), 404 OperationOutcome passed through; only allowed headers go either way")
    func readAndHeaders() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.resetCounters()
        let read = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch,
                                         headers: [("Authorization-Extra", "x"), ("X-Forwarded-For", "1.2.3.4"), ("Accept", "application/fhir+json")])
        #expect(read.status == 200)
        #expect(try JSONParser.parse(read.body)["id"]?.stringValue == "pat-1")
        #expect(read.header("ETag") == "W/\"1\"" && read.header("Last-Modified") != nil && read.header("Cache-Control") == "no-store")
        #expect(read.header("Set-Cookie") == nil) // the EHR's cookie stays upstream
        // EHR content never runs as a page of the BFF's origin.
        #expect(read.header("Content-Security-Policy") == "default-src 'none'; sandbox" && read.header("X-Content-Type-Options") == "nosniff")
        let upstream = try #require(await h.sandbox.state.recentFHIRRequests.last)
        let names = Set(upstream.headers.map { $0.name.lowercased() })
        #expect(names.isSubset(of: ["host", "authorization", "accept", "accept-encoding", "user-agent", "if-none-match", "if-modified-since"]))
        // The body is asked for as it is: nothing on the way decodes a compressed one.
        #expect(upstream.headers.first { $0.name.lowercased() == "accept-encoding" }?.value == "identity")
        #expect(upstream.headers.first { $0.name.lowercased() == "authorization" }?.value.hasPrefix("Bearer ") == true)
        #expect(!upstream.headers.contains { $0.value.contains("bff_session") || $0.name.lowercased() == "cookie" })

        let notModified = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch, headers: [("If-None-Match", "W/\"1\"")])
        #expect(notModified.status == 304 && notModified.body.isEmpty)
        let head = try await browser.api("HEAD", h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(head.status == 200 && head.body.isEmpty)
        let missing = try await browser.api(h.baseURL + "/fhir/Patient/nobody", launch: launch)
        let outcome = try JSONParser.parse(missing.body)
        #expect(missing.status == 404 && outcome["resourceType"]?.stringValue == "OperationOutcome")
        #expect(missing.header("Content-Security-Policy") == "default-src 'none'; sandbox")
        #expect(try await browser.api("POST", h.baseURL + "/fhir/Patient", launch: launch).status == 405)
        // Counted under the route whose methods it lacks, not as an unknown path.
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        #expect(metrics.contains("bff_http_requests_total{route=\"/fhir/*\",status=\"405\"} 1"), "\(metrics)")
    }

    @Test("paging through next links returns every Observation once: links under the type, and HAPI FHIR's under the base itself",
          arguments: [false, true])
    func paging(hapi: Bool) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        await h.sandbox.state.setHAPIPaging(hapi)
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        var url: String? = h.baseURL + "/fhir/Observation?patient=pat-1&_count=7"
        var ids: [String] = []
        var pages = 0
        while let next = url {
            // HAPI's links after the first page name the base: {base}?_getpages=<search id>&….
            #expect(next.hasPrefix(h.baseURL + (hapi && pages > 0 ? "/fhir?_getpages=" : "/fhir/")), "\(next)")
            pages += 1
            let bundle = try JSONParser.parse(try await browser.api(next, launch: launch).body)
            for entry in bundle["entry"]?.arrayValue ?? [] {
                #expect(entry["fullUrl"]?.stringValue?.hasPrefix(h.baseURL + "/fhir/Observation/") == true)
                ids.append(entry["resource"]?["id"]?.stringValue ?? "")
            }
            url = bundle["link"]?.arrayValue?.first { $0["relation"]?.stringValue == "next" }?["url"]?.stringValue
        }
        #expect(ids.count == 25 && Set(ids).count == 25 && pages == 4)
    }

    @Test("unsafe paths are refused with no upstream call", arguments: [
        "/fhir/Patient/..%2F..%2Fadmin", "/fhir/Patient/%2e%2e/x", "/fhir/..", "/fhir/Patient//pat-1", "/fhir/Patient/pat-1%00",
        "/fhir/Patient/a%5cb", "/fhir/Patient/a@b", "/fhir/http:%2F%2Fevil.example%2FPatient", "/fhir/Patient/pat-1?x=" + String(repeating: "a", count: 5000),
        "/fhir/", "/fhir/Patient/%252e%252e",
        // Control bytes percent-encoded in the query, any of them, in either case.
        "/fhir/Patient?name=a%0Ab", "/fhir/Patient?name=a%09b", "/fhir/Patient?name=a%1bb", "/fhir/Patient?name=a%7fb",
        // At the base itself only a page of search results: not a system search, nor a page with a search's parameters.
        "/fhir", "/fhir?_type=Observation", "/fhir?_getpages=x&patient=pat-2", "/fhir?_getpages=", "/fhir?_count=10",
        // A page id the BFF did not bind (`PageBinding`), and a page at /fhir/ rather than /fhir.
        "/fhir?_getpages=5f1c", "/fhir/?_getpages=AAAAAAAAAAAAAAAAAAAAAA.5f1c",
        // Page parameters on any other path: HAPI would page there too, with no check of the id.
        "/fhir/$x?_getpages=5f1c&_getpagesoffset=20", "/fhir/Patient?%5Fgetpages=5f1c",
        "/fhir/Patient?_count=1;_getpages=5f1c",
    ])
    func pathSafety(_ path: String) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.resetCounters()
        let page = try await browser.api(h.baseURL + path, launch: launch)
        #expect(page.status == 400)
        #expect(await h.sandbox.state.fhirRequests == 0)
    }

    @Test("a grant written as Epic writes some (v1 permissions capitalised, no context) allows what it names, and only that")
    func epicStyleScopes() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        await h.sandbox.state.setTokenResponseExtras(["scope": "launch/patient openid fhirUser user/Patient.Read Observation.read Condition.search offline_access"])
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.resetCounters()
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        #expect(try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1", launch: launch).status == 200)
        #expect(try await browser.api(h.baseURL + "/fhir/Condition?patient=pat-1", launch: launch).status == 200)
        #expect(await h.sandbox.state.fhirRequests == 3)
        // Search is not read, and a type not named is not granted.
        #expect(try await browser.api(h.baseURL + "/fhir/Condition/cond-1-1", launch: launch).status == 403)
        #expect(try await browser.api(h.baseURL + "/fhir/MedicationRequest?patient=pat-1", launch: launch).status == 403)
        #expect(await h.sandbox.state.fhirRequests == 3)
    }

    @Test("Accept: the front end's goes upstream, but one naming no type (*/*, as fetch() sends) or none asks for FHIR JSON, the form the proxy rewrites",
          arguments: [("*/*", "application/fhir+json"), ("*/* ; q=0.8", "application/fhir+json"), ("", "application/fhir+json"),
                      (nil, "application/fhir+json"),
                      ("application/fhir+xml", "application/fhir+xml"), ("application/json, text/plain, */*", "application/json, text/plain, */*")])
    func acceptSentUpstream(given: String?, sent: String) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        _ = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch, headers: given.map { [("Accept", $0)] } ?? [])
        let upstream = try #require(await h.sandbox.state.recentFHIRRequests.last)
        #expect(upstream.headers.filter { $0.name.lowercased() == "accept" }.map(\.value) == [sent])
    }

    @Test("reads outside the granted scopes are 403 with no upstream call")
    func scopes() async throws {
        let h = try await BFFHarness.start(registrations: { s, _ in
            [IssuerRegistration(iss: s.fhirBaseURL, clientID: "test-app",
                                standaloneScope: "launch/patient openid fhirUser patient/Patient.rs patient/Observation.rs?category=laboratory offline_access")]
        })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.resetCounters()
        #expect(try await browser.api(h.baseURL + "/fhir/Condition?patient=pat-1", launch: launch).status == 403)
        #expect(try await browser.api(h.baseURL + "/fhir/MedicationRequest/med-1-1", launch: launch).status == 403)
        #expect(try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1&category=vital-signs", launch: launch).status == 403)
        // The restriction met only after a `;`: an EHR that splits at `&` alone (HAPI FHIR, Go,
        // Python) reads `_count` = `50;category=laboratory` and applies no category.
        for query in ["_count=50;category=laboratory", "code:not=x;category=laboratory"] {
            let hidden = try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1&" + query, launch: launch)
            #expect(hidden.status == 403 && hidden.text.contains("/problems/scope"), "\(query): \(hidden.status)")
        }
        // A reverse chain after a forward link says whether the patient has such a Condition.
        let chained = try await browser.api(h.baseURL + "/fhir/Observation?category=laboratory&subject:Patient._has:Condition:subject:code=x",
                                            launch: launch)
        #expect(chained.status == 403 && chained.text.contains("filtering on Condition data"), "\(chained.status): \(chained.text)")
        // Paths under a granted type whose results are other types, or any type.
        for path in ["Patient/pat-1/Condition", "Patient/pat-1/Observation?category=vital-signs", "Patient/pat-1/$everything",
                     "Patient/$match", "_history", "$export",
                     // History takes no search parameters: the EHR would send every Observation's versions.
                     "Observation/_history?category=laboratory"] {
            let refused = try await browser.api(h.baseURL + "/fhir/" + path, launch: launch)
            #expect(refused.status == 403 && refused.text.contains("/problems/scope"), "\(path): \(refused.status)")
        }
        #expect(await h.sandbox.state.fhirRequests == 0)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1/Observation?category=laboratory", launch: launch).status != 403)
        #expect(await h.sandbox.state.fhirRequests == 1, "a compartment search the scopes allow reaches the EHR")
        #expect(try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1&category=laboratory", launch: launch).status == 200)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
    }

    @Test("a search that includes, or filters on, resources of types the launch was not granted is 403 with no upstream call")
    func includedTypes() async throws {
        let h = try await BFFHarness.start(registrations: { s, _ in
            [IssuerRegistration(iss: s.fhirBaseURL, clientID: "test-app", standaloneScope: "launch/patient openid fhirUser patient/Patient.rs")]
        })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.resetCounters()
        let revinclude = try await browser.api(h.baseURL + "/fhir/Patient?_id=pat-1&_revinclude=Observation:patient", launch: launch)
        #expect(revinclude.status == 403 && revinclude.text.contains("/problems/scope"), "\(revinclude.status)")
        #expect(revinclude.text.contains("do not allow including Observation (through _revinclude)"), "\(revinclude.text)")
        let untargeted = try await browser.api(h.baseURL + "/fhir/Patient?_id=pat-1&_include=Patient:general-practitioner", launch: launch)
        #expect(untargeted.status == 403 && untargeted.text.contains("/problems/scope"), "\(untargeted.status)")
        #expect(untargeted.text.contains("name the target type"), "\(untargeted.text)")
        // _has says whether a patient has a matching Observation: a read of Observations.
        let has = try await browser.api(h.baseURL + "/fhir/Patient?_has:Observation:patient:code=1234-5", launch: launch)
        #expect(has.status == 403 && has.text.contains("do not allow filtering on Observation data (through _has:Observation:patient:code)"),
                "\(has.status): \(has.text)")
        for query in ["_revinclude:iterate=Observation:patient", "_include=Patient:link:Patient&_include:iterate=Patient:organization:Organization",
                      "_contained=true", "_has:Condition:subject:_has:Observation:focus:code=x", "general-practitioner:Practitioner.name=x",
                      "general-practitioner.name=x", "organization:Organization.partof:Organization.name=x", "_filter=name%20eq%20x",
                      // Hidden behind ;, which some servers split queries at.
                      "_count=1;_revinclude=Observation:patient", "x=1;_has:Observation:patient:code=1"] {
            let refused = try await browser.api(h.baseURL + "/fhir/Patient?_id=pat-1&" + query, launch: launch)
            #expect(refused.status == 403 && refused.text.contains("/problems/scope"), "\(query): \(refused.status)")
        }
        // A page at the EHR's base (HAPI FHIR's paging links) is checked alike.
        let page = try await browser.api(h.baseURL + "/fhir?_getpages=AAAAAAAAAAAAAAAAAAAAAA.abc&_getpagesoffset=10&_include=Observation:subject:Observation",
                                         launch: launch)
        #expect(page.status == 403 && page.text.contains("do not allow including Observation (through _include)"), "\(page.status)")
        #expect(await h.sandbox.state.fhirRequests == 0)
        #expect(await h.sandbox.state.recentFHIRRequests.isEmpty)
        let search = try await browser.api(h.baseURL + "/fhir/Patient?_id=pat-1", launch: launch)
        #expect(search.status == 200)
        #expect(try JSONParser.parse(search.body)["entry"]?.arrayValue?.first?["resource"]?["id"]?.stringValue == "pat-1")
        // Including, or filtering on, a granted type (Patient) goes through.
        #expect(try await browser.api(h.baseURL + "/fhir/Patient?_id=pat-1&_include=Patient:link:Patient", launch: launch).status == 200)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient?_id=pat-1&link:Patient.name=x", launch: launch).status != 403)
        #expect(await h.sandbox.state.fhirRequests == 3)
    }

    @Test("a page of search results at the EHR's base needs a search scope: a launch that may only read gets 403 with no upstream call")
    func pageWithoutSearchScope() async throws {
        let h = try await BFFHarness.start(registrations: { s, _ in
            [IssuerRegistration(iss: s.fhirBaseURL, clientID: "test-app", standaloneScope: "launch/patient openid fhirUser patient/Patient.r")]
        })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.resetCounters()
        let page = try await browser.api(h.baseURL + "/fhir?_getpages=AAAAAAAAAAAAAAAAAAAAAA.abc&_getpagesoffset=10&_count=10", launch: launch)
        #expect(page.status == 403 && page.text.contains("they allow no search"), "\(page.status): \(page.text)")
        #expect(await h.sandbox.state.fhirRequests == 0)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
    }

    @Test("a HAPI paging link serves only the launch that searched: another launch's tab, or an altered link, gets 403 with no EHR call; the EHR and the audit trail see the id alone")
    func pageOfAnotherLaunch() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        await h.sandbox.state.setHAPIPaging(true)
        let browser = Browser(client: h.client)
        let first = try #require(try await h.standaloneLogin(browser, patient: "pat-1").launch)
        let second = try #require(try await h.standaloneLogin(browser, patient: "pat-2").launch)
        let bundle = try JSONParser.parse(try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1&_count=7", launch: first).body)
        let next = try #require(bundle["link"]?.arrayValue?.first { $0["relation"]?.stringValue == "next" }?["url"]?.stringValue)
        await h.sandbox.state.resetCounters()
        let otherTab = try await browser.api(next, launch: second)
        #expect(otherTab.status == 403 && otherTab.text.contains("/problems/page-of-another-launch"), "\(otherTab.status): \(otherTab.text)")
        let altered = try await browser.api(next.replacingOccurrences(of: "&_getpagesoffset", with: "x&_getpagesoffset"), launch: first)
        #expect(altered.status == 403 && altered.text.contains("/problems/page-of-another-launch"), "\(altered.status)")
        #expect(await h.sandbox.state.fhirRequests == 0)

        let page = try await browser.api(next, launch: first)
        #expect(page.status == 200)
        let sent = try #require(await h.sandbox.state.recentFHIRRequests.last?.target)
        let id = try #require(next.split(separator: "=")[1].split(separator: "&").first?.split(separator: ".", maxSplits: 1).last)
        #expect(sent.hasPrefix("/fhir?_getpages=\(id)&"), "\(sent)")
        await h.bff.services.audit.flush()
        let entries = try await h.database.store.auditEntries(since: nil)
        #expect(entries.last?.pathAndQuery == "/" + sent.dropFirst("/fhir".count), "\(entries.last?.pathAndQuery ?? "")")
    }

    @Test("a launch whose EHR left the issuers file (a restart with a new file; the sessions stayed) is 401 there, and the EHR is not contacted")
    func issuerNoLongerRegistered() async throws {
        var instance = 0 // instance 1 is the one restarted without the sandbox's registration
        let h = try await BFFHarness.start(instances: 2, registrations: { s, _ in
            defer { instance += 1 }
            return [IssuerRegistration(iss: instance == 0 ? s.fhirBaseURL : "https://other-ehr.example/fhir", clientID: "test-app")]
        })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.resetCounters()
        let refused = try await browser.api("http://127.0.0.1:\(h.bffs[1].port)/fhir/Patient/pat-1", launch: launch)
        #expect(refused.status == 401 && refused.text.contains("/problems/session-ended"), "\(refused.status) \(refused.text)")
        #expect(await h.sandbox.state.fhirRequests == 0)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200, "the session was kept")
    }

    @Test("a multi-megabyte body streams through complete")
    func streaming() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        let page = try await browser.api(h.baseURL + "/fhir/Binary/large?size=6000000", launch: launch)
        #expect(page.status == 200 && page.body.count == 6_000_000)
        #expect(page.body.prefix(12) == Array(#"{"resourceTy"#.utf8)[...])
        // The EHR's side ended well too (its count comes just after its last write).
        try await h.waitForSandbox(within: .seconds(10)) { await $0.streamsSentWhole > 0 }
        #expect(await h.sandbox.state.streamsSentWhole == 1)
        #expect(await h.sandbox.state.streamsCutShort == 0)
    }

    @Test("an upstream that closes mid-body never looks like a complete 200, and the metrics count each as truncated; the audit trail and its export say each read broke off (outcome 8), not a success")
    func truncated() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.setCloseMidBody(true)
        // A small body is read whole before anything is answered: 502.
        let small = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(small.status == 502 && small.header("Content-Type") == "application/problem+json", "\(small.status)")
        // A large one streams, its head already sent: the connection breaks off unfinished.
        // 4 MB declared, 2 MB sent: reading pauses at 1 MiB, which hands the head over first.
        await #expect(throws: HTTPClientError.self) { try await browser.api(h.baseURL + "/fhir/Binary/large?size=4000000", launch: launch) }
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        #expect(metrics.contains("bff_upstream_errors_total{kind=\"truncated\"} 2"),
                "\(metrics.split(separator: "\n").filter { $0.contains("upstream_errors") })")
        await h.sandbox.state.setCloseMidBody(false)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)

        await h.bff.services.audit.flush()
        let trail = try await h.database.store.auditEntries(since: nil)
        #expect(trail.map(\.brokenOff) == [true, true, false], "\(trail.map { ($0.pathAndQuery, $0.brokenOff, $0.bytes) })")
        #expect(trail.count == 3 && trail[0].bytes == 0 && trail[1].bytes > 0 && trail[1].bytes < 4_000_000)
        var lines = ""
        _ = try await AuditEventExport.export(from: h.database.store, since: nil, settle: .zero) { lines += $0 }
        let events = try lines.split(separator: "\n").map { try JSONParser.parse(Array($0.utf8)) }
        #expect(events.map { $0["outcome"]?.stringValue } == ["8", "8", "0"])
        #expect(events.first?["outcomeDesc"]?.stringValue == "upstream HTTP 200; the response broke off, 0 bytes passed on")
    }

    @Test("an EHR that redirects a read outside its FHIR base: 502, no Location passed on, the read audited, counted as a redirect",
          arguments: ["https://evil.example/steal", "/fhir/../session", "/fhir/Patient/%2e%2e/%2e%2e/session"]) // elsewhere; under the base as text only
    func redirectOutsideBase(location: String) async throws {
        let front = try RiggedEHRFront(path: "/fhir/Binary/moved") { _, head in
            // A path is the EHR's own origin (from the Host the BFF sent), so only its dot segments climb out.
            let host = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("host:") }.map { $0.dropFirst(5).trimmingCharacters(in: .whitespaces) } ?? ""
            let target = location.hasPrefix("/") ? "http://\(host)\(location)" : location
            return Array("HTTP/1.1 302 Found\r\nLocation: \(target)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        }
        defer { front.shutdown() }
        let (h, browser, launch) = try await BFFHarness.signedIn(behind: front)
        defer { Task { await h.stop() } }
        let page = try await browser.api(h.baseURL + "/fhir/Binary/moved", launch: launch)
        #expect(page.status == 502 && page.text.contains("outside its FHIR base"), "\(page.status): \(page.text)")
        #expect(page.location == nil)
        #expect(front.answered == 1)
        await h.bff.services.audit.flush()
        #expect(try await h.database.store.auditEntries(since: nil).map(\.upstreamStatus) == [302])
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        #expect(metrics.contains("bff_upstream_errors_total{kind=\"redirect\"} 1"), "\(metrics.split(separator: "\n").filter { $0.contains("upstream_errors") })")
    }

    @Test("a relative Location (RFC 9110 §10.2.2) is resolved against the read's URL, then rewritten as an absolute one is; one that climbs out is 502",
          arguments: [("/fhir/Patient/ok", "/fhir/Patient/ok"), ("ok", "/fhir/Binary/ok"), ("../Patient/1?x=2", "/fhir/Patient/1?x=2"),
                      ("../../session", nil), ("//evil.example/fhir/Patient/1", nil)] as [(String, String?)])
    func relativeLocation(location: String, expected: String?) async throws {
        let front = try RiggedEHRFront(path: "/fhir/Binary/moved") { _ in
            Array("HTTP/1.1 302 Found\r\nLocation: \(location)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        }
        defer { front.shutdown() }
        let (h, browser, launch) = try await BFFHarness.signedIn(behind: front)
        defer { Task { await h.stop() } }
        let page = try await browser.api(h.baseURL + "/fhir/Binary/moved", launch: launch)
        if let expected {
            #expect(page.status == 302 && page.location == h.baseURL + expected, "\(page.status): \(page.location ?? "no Location")")
        } else {
            #expect(page.status == 502 && page.location == nil, "\(page.status): \(page.location ?? "no Location")")
        }
    }

    @Test("a body the EHR delimits by closing its connection, which may be cut short, is passed on delimited by the close: never given a chunked end that would say it is complete")
    func closeDelimitedBodyPassedOn() async throws {
        let partial = #"{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"Patient","id":"#
        let front = try RiggedEHRFront(path: "/fhir/Patient") { _ in
            Array("HTTP/1.1 200 OK\r\nContent-Type: application/fhir+json\r\n\r\n\(partial)".utf8) // then a plain close (FIN)
        }
        defer { front.shutdown() }
        let (h, browser, launch) = try await BFFHarness.signedIn(behind: front)
        defer { Task { await h.stop() } }
        let page = try await browser.api(h.baseURL + "/fhir/Patient", launch: launch)
        #expect(page.status == 200 && page.text == partial, "\(page.status): \(page.text)")
        #expect(page.header("Transfer-Encoding") == nil && page.header("Content-Length") == nil, "\(page.headers)")
        #expect(page.header("Connection")?.lowercased() == "close", "\(page.headers)")
    }

    @Test("an EHR answering what is not HTTP: 502, counted as malformed (reached, but broken); one closing without an answer (a balancer with no backend) as unreachable",
          arguments: [("HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\n{}", "malformed"), ("", "unreachable")])
    func malformedAnswerCounted(answer: String, kind: String) async throws {
        let front = try RiggedEHRFront(path: "/fhir/Patient/garbled") { _ in Array(answer.utf8) }
        defer { front.shutdown() }
        let (h, browser, launch) = try await BFFHarness.signedIn(behind: front)
        defer { Task { await h.stop() } }
        let page = try await browser.api(h.baseURL + "/fhir/Patient/garbled", launch: launch)
        #expect(page.status == 502, "\(page.status): \(page.text)")
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        #expect(countedSeries(metrics, "bff_upstream_errors_total") == ["bff_upstream_errors_total{kind=\"\(kind)\"} 1"],
                "\(metrics.split(separator: "\n").filter { $0.contains("upstream_errors") })")
    }

    @Test("a passed field whose value is not UTF-8 (an ETag of Latin-1 bytes) is left out rather than altered: a changed validator would never match")
    func nonUTF8FieldDropped() async throws {
        let body = #"{"resourceType":"Patient","id":"e"}"#
        let front = try RiggedEHRFront(path: "/fhir/Patient/e") { _ in
            Array("HTTP/1.1 200 OK\r\nContent-Type: application/fhir+json\r\nETag: W/\"".utf8) + [0xFF, 0xFE, 0xC3, 0x28]
                + Array("\"\r\nLast-Modified: Tue, 01 Dec 2026 10:00:00 GMT\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
        }
        defer { front.shutdown() }
        let (h, browser, launch) = try await BFFHarness.signedIn(behind: front)
        defer { Task { await h.stop() } }
        let page = try await browser.api(h.baseURL + "/fhir/Patient/e", launch: launch)
        #expect(page.status == 200 && page.text == body)
        #expect(page.header("ETag") == nil, "\(page.header("ETag") ?? "")")
        #expect(page.header("Last-Modified") == "Tue, 01 Dec 2026 10:00:00 GMT")
    }

    @Test("an EHR that echoes the bearer token (in its body, a redirect's Location, an ETag): the front end gets stars in its place",
          arguments: [0, 300_000]) // a body read whole, and one streamed through (over FHIRProxy.bufferLimit)
    func echoedTokenMasked(padding: Int) async throws {
        let seen = Mutex<String?>(nil)
        let front = try RiggedEHRFront(path: "/fhir/Patient/echo") { _, head in
            let field = { (name: String) -> String in
                let line = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name + ":") } ?? ""
                return String(line.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces)
            }
            let token = String(field("authorization").dropFirst("Bearer ".count))
            seen.withLock { $0 = token }
            let body = #"{"resourceType":"OperationOutcome","text":{"div":"\#(String(repeating: "x", count: padding))"},"#
                + #""issue":[{"severity":"error","code":"security","diagnostics":"moved; was asked with Bearer \#(token)"}]}"#
            return Array(("HTTP/1.1 302 Found\r\nLocation: http://\(field("host"))/fhir/Patient/x?access_token=\(token)&_format=json\r\n"
                + "ETag: W/\"\(token)\"\r\nContent-Type: application/fhir+json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body).utf8)
        }
        defer { front.shutdown() }
        let (h, browser, launch) = try await BFFHarness.signedIn(behind: front)
        defer { Task { await h.stop() } }
        let page = try await browser.api(h.baseURL + "/fhir/Patient/echo", launch: launch)
        let token = seen.withLock { $0 } ?? ""
        let stars = String(repeating: "*", count: token.utf8.count)
        #expect(token.utf8.count >= 16)
        #expect(page.status == 302)
        #expect(page.location == h.baseURL + "/fhir/Patient/x?access_token=\(stars)&_format=json", "\(page.location ?? "")")
        #expect(page.header("ETag") == "W/\"\(stars)\"")
        #expect(page.text.hasSuffix("was asked with Bearer \(stars)\"}]}"), "\(page.text)")
        #expect(!page.text.contains(token) && !page.headers.contains { $0.value.contains(token) })
    }

    @Test("an EHR that stops sending in the middle of a small body: 504 at the read timeout, counted as a timeout")
    func stopsMidBody() async throws {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/fhir+json\r\nContent-Length: 1000\r\n\r\n"
        let front = try RiggedEHRFront(path: "/fhir/Patient/silent", hold: 10) { _ in Array((head + #"{"resourceType":"Pat"#).utf8) }
        defer { front.shutdown() }
        let (h, browser, launch) = try await BFFHarness.signedIn(behind: front, readTimeout: .seconds(2))
        defer { Task { await h.stop() } }
        let page = try await browser.api(h.baseURL + "/fhir/Patient/silent", launch: launch)
        #expect(page.status == 504 && page.text.contains("stopped sending"), "\(page.status): \(page.text)")
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        #expect(metrics.contains("bff_upstream_errors_total{kind=\"timeout\"} 1"), "\(metrics.split(separator: "\n").filter { $0.contains("upstream_errors") })")
    }

    @Test("a read kept waiting past its timeouts by its own launch's reads is 429, never sent, and not the EHR's failure")
    func readKeptWaitingByItsOwnLaunch() async throws {
        // The EHR answers /Patient/slow with a chunked head, then a byte every 200 ms for 20 s:
        // busy, never silent for the read timeout.
        let front = try RiggedEHRFront(path: "/fhir/Patient/slow", hold: 20, drip: Array("1\r\nx\r\n".utf8)) { _ in
            Array("HTTP/1.1 200 OK\r\nContent-Type: application/fhir+json\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        }
        defer { front.shutdown() }
        // One launch may hold 1 of the 2 connections; a read waits at most 5 s (connect) + 3 s
        // (read). The slow read, sent a byte every 200 ms, is never silent for 3 s.
        let h = try await BFFHarness.start(readTimeout: .seconds(3), ehrConnections: (perHost: 2, reserved: 1),
                                           sandbox: { $0.publicBaseURL = front.url })
        defer { Task { await h.stop() } }
        front.forward(to: h.sandbox.port)
        let busy = Browser(client: h.client), other = Browser(client: h.client)
        let busyLaunch = try #require(try await h.standaloneLogin(busy).launch)
        let otherLaunch = try #require(try await h.standaloneLogin(other).launch)
        await h.sandbox.state.resetCounters()
        let slow = Task { try? await busy.api(h.baseURL + "/fhir/Patient/slow", launch: busyLaunch) }
        defer { slow.cancel() }
        // Once the EHR answers it, the slow read holds the launch's connection.
        let answered = ContinuousClock.now + .seconds(30) // a no-hang limit only
        while front.answered == 0 && ContinuousClock.now < answered { try await Task.sleep(for: .milliseconds(20)) }
        let kept = Task { try await busy.api(h.baseURL + "/fhir/Patient/pat-1", launch: busyLaunch) }
        // Meanwhile another launch's read has the connection kept for others.
        #expect(try await other.api(h.baseURL + "/fhir/Patient/pat-1", launch: otherLaunch).status == 200)
        let page = try await kept.value
        #expect(page.status == 429 && page.text.contains("too-many-reads"), "\(page.status): \(page.text)")
        #expect(await h.sandbox.state.fhirRequests == 1, "only the other launch's read reached the sandbox")
        let metrics = h.bff.services.metrics.render(activeSessions: nil, pool: nil, audit: h.bff.services.audit.status)
        #expect(countedSeries(metrics, "bff_upstream_errors_total").isEmpty, "\(countedSeries(metrics, "bff_upstream_errors_total"))")
    }

    @Test("a browser that takes nothing of a streamed body for the stall timeout loses that response and frees the EHR's connection; the metrics say stalled")
    func stalledBrowser() async throws {
        // The EHR's transfer is given up after 1 s; the browser's connection, whose writes
        // wait all that time, is dropped at the write timeout, 5 s. (In service the order is
        // the other way round, 30 s and 120 s: a browser that takes nothing at all is dropped
        // by the write timeout first, with the transfer still whole, and only one that trickles
        // is stalled, noticed at the handler's next read. This order reaches the stall in
        // seconds, and the count through `HTTPBodyStream.failure`.)
        let h = try await BFFHarness.start(stallTimeout: .seconds(1), writeTimeout: 5)
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.standaloneLogin(browser).launch)
        let cookie = browser.cookieValues.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let port = h.bff.port, size = 64 << 20
        let reader = try RawHTTPClient(port: port, timeout: 60)
        defer { reader.close() }
        reader.send("GET /fhir/Binary/large?size=\(size) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nCookie: \(cookie)\r\n"
                    + "X-CSRF: 1\r\nX-BFF-Launch: \(launch)\r\n\r\n")
        // Nothing is read: the sockets' buffers and the megabyte read ahead fill, the stall
        // timeout runs out, then the write timeout (a loaded machine may take its time).
        var metrics = ""
        for _ in 0..<150 where countedSeries(metrics, "bff_upstream_errors_total").isEmpty {
            try await Task.sleep(for: .milliseconds(200))
            metrics = try await browser.request(h.baseURL + "/metrics").text
        }
        #expect(countedSeries(metrics, "bff_upstream_errors_total") == ["bff_upstream_errors_total{kind=\"stalled\"} 1"],
                "\(countedSeries(metrics, "bff_upstream_errors_total"))")
        // What had been sent, and then the end of the connection: never the whole body.
        let received = try await runBlocking { reader.readUntilClose(timeout: 60) }
        #expect(received.count < size, "\(received.count) bytes")
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
    }

    /// An EHR answer with both framings: `Content-Length: <declared>` and 8 MB in chunks.
    private static func bothFramings(declared: Int, method: String) -> [UInt8] {
        let head = Array("HTTP/1.1 200 OK\r\nContent-Type: application/pdf\r\nContent-Length: \(declared)\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        guard method == "GET" else { return head }
        let chunk = Array("186a0\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "A"), count: 100_000) + [13, 10]
        var bytes = head
        bytes.reserveCapacity(head.count + 80 * chunk.count + 5)
        for _ in 0..<80 { bytes.append(contentsOf: chunk) } // whole-array copies: fast in a debug build too
        return bytes + Array("0\r\n\r\n".utf8)
    }

    // 10: small enough for the proxy to read the body whole; 262,145: over the 256 KiB it
    // reads whole, so the body would stream under that length.
    @Test("an EHR that sends Content-Length beside a chunked body: the chunks count, and that length is not passed on",
          arguments: [10, 262_145])
    func contentLengthBesideChunked(declared: Int) async throws {
        // 8 MB: far more than the buffers between the proxy and the test's client hold, so the
        // client gets well past `declared` bytes before a length check at the end could cut
        // the connection. Not JSON: the body is passed on as it is.
        let answers = ["GET": FHIRProxyTests.bothFramings(declared: declared, method: "GET"),
                       "HEAD": FHIRProxyTests.bothFramings(declared: declared, method: "HEAD")]
        let front = try RiggedEHRFront(path: "/fhir/Binary/both-framings") { answers[$0] ?? [] }
        defer { front.shutdown() }
        let (h, browser, launch) = try await BFFHarness.signedIn(behind: front)
        defer { Task { await h.stop() } }
        let cookie = browser.cookieValues.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let port = h.bff.port
        let (get, afterGet, head) = try await runBlocking { () throws -> (RawHTTPClient.RawResponse?, [UInt8], RawHTTPClient.RawResponse?) in
            func request(_ method: String) throws -> RawHTTPClient {
                let c = try RawHTTPClient(port: port, timeout: 60) // 8 MB on a loaded machine
                c.send("\(method) /fhir/Binary/both-framings HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nCookie: \(cookie)\r\n"
                       + "X-CSRF: 1\r\nX-BFF-Launch: \(launch)\r\nConnection: close\r\n\r\n")
                return c
            }
            let g = try request("GET")
            let get = g.readResponse()
            let afterGet = g.readUntilClose()
            return (get, afterGet, try request("HEAD").readResponse(isHead: true))
        }
        // A correctly framed, whole body, or one broken off: never more bytes than the
        // response's own Content-Length, nor a short body that looks complete.
        #expect(get?.status == 200)
        #expect(get?.complete == false || get?.body.count == 8_000_000, "\(get?.body.count ?? 0) bytes, framed by \(get?["Content-Length"] ?? "chunks")")
        #expect(afterGet.count == 0, "bytes after a body of Content-Length \(get?["Content-Length"] ?? "none")")
        // HEAD describes the GET, whose body would be chunked.
        #expect(head?.status == 200 && head?["Content-Length"] == nil, "HEAD: Content-Length \(head?["Content-Length"] ?? "none")")
    }

    @Test("while the audit trail cannot be written and maxPending entries wait, reads are 503 with no EHR call; once written, reads go on")
    func auditBackedUpFailsClosed() async throws {
        let h = try await BFFHarness.start(auditMaxPending: 1)
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        // A DBA's lock on the audit table (VACUUM FULL, say): the writer's COPY fails after
        // its lock_timeout; sessions, in other tables, still work.
        let lock = try await TableLock.take(h.database.url)

        let first = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(first.status == 200)
        let calls = await h.sandbox.state.fhirRequests
        let refused = try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1", launch: launch)
        #expect(refused.status == 503)
        #expect(try JSONParser.parse(refused.body)["type"]?.stringValue?.hasSuffix("audit-unavailable") == true, "\(refused.text)")
        #expect(await h.sandbox.state.fhirRequests == calls, "the refused read reached the EHR")

        try await lock.release()
        let deadline = ContinuousClock.now + .seconds(60)
        var again = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        while again.status == 503 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
            again = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        }
        #expect(again.status == 200)
        await h.bff.services.audit.flush()
        let trail = try await h.database.store.auditEntries(since: nil).map(\.pathAndQuery)
        #expect(trail.first == "/Patient/pat-1" && !trail.contains { $0.hasPrefix("/Observation") }, "\(trail)")
    }

    @Test("an EHR that compresses unasked: 502, never a body the front end would take for a corrupt resource")
    func unaskedContentCoding() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.setFHIRContentEncoding("gzip")
        let coded = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(coded.status == 502 && coded.header("Content-Type") == "application/problem+json")
        await h.sandbox.state.setFHIRContentEncoding("identity") // the one coding asked for
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        #expect(metrics.contains("bff_upstream_errors_total{kind=\"encoding\"} 1"))
    }

    @Test("a coding in a second Content-Encoding field (identity, then gzip) is refused as the first would be: 502")
    func secondContentEncoding() async throws {
        let front = try RiggedEHRFront(path: "/fhir/Patient/coded") { _ in
            Array("HTTP/1.1 200 OK\r\nContent-Type: application/fhir+json\r\nContent-Encoding: identity\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".utf8)
        }
        defer { front.shutdown() }
        let (h, browser, launch) = try await BFFHarness.signedIn(behind: front)
        defer { Task { await h.stop() } }
        let page = try await browser.api(h.baseURL + "/fhir/Patient/coded", launch: launch)
        #expect(page.status == 502 && page.text.contains("content coding"), "\(page.status): \(page.text)")
    }

    @Test("a slow EHR gives 504 within the read timeout; an EHR that is down gives 502")
    func upstreamFailures() async throws {
        // The read timeout covers every call to the EHR, the login's and the recovery read's
        // too: 2 s, for a sandbox that answers at once, leaves room for a loaded machine (the
        // sandbox answers on its event loop's thread, not on the Swift pool that tests can hold).
        let h = try await BFFHarness.start(readTimeout: .seconds(2))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.setFHIRDelay(.seconds(60)) // the sandbox's stop ends it: no one waits for it
        let started = ContinuousClock.now, asked = Date()
        let slow = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        let answered = Date()
        // 2 s configured against a 60 s delay: the 504 must come long before the EHR would
        // answer. Timed on this task, which a busy machine can hold back: hence 30 s, not 2.
        #expect(slow.status == 504 && ContinuousClock.now - started < .seconds(30), "\(slow.status) after \(ContinuousClock.now - started)")
        await h.sandbox.state.setFHIRDelay(nil)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        await h.sandbox.shutdown()
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 502)

        // The reads without an answer are in the audit trail too (the EHR may have read the
        // data all the same), with upstream status 0 and a failed outcome.
        await h.bff.services.audit.flush()
        let entries = try await h.database.store.auditEntries(since: nil)
        #expect(entries.map(\.upstreamStatus) == [0, 200, 0])
        // In the trail at the time the read was made, not when the BFF gave up on it 2 s later.
        #expect(entries[0].at >= asked.addingTimeInterval(-0.1) && answered.timeIntervalSince(entries[0].at) >= 1.5,
                "asked \(asked), recorded \(entries[0].at), answered \(answered)")
        let event = AuditEventExport.auditEvent(entries[0])
        #expect(event["outcome"]?.stringValue == "8" && event["outcomeDesc"]?.stringValue == "no answer from the EHR")
        #expect(AuditEventExport.auditEvent(entries[1])["outcome"]?.stringValue == "0")
    }

    @Test("a browser that gives up on a read (a fetch aborted) while the EHR is slow: the read is dropped at once, audited, counted as 499, not as the EHR's failure")
    func readAbandonedByBrowser() async throws {
        // A read timeout far beyond the test: without the cancellation the read would still
        // wait on the EHR when the checks below give up.
        let h = try await BFFHarness.start(readTimeout: .seconds(120))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        let launchID = try #require(launch)
        await h.sandbox.state.resetCounters()
        await h.sandbox.state.setFHIRDelay(.seconds(120)) // the sandbox's stop ends it: no one waits for it
        let cookie = browser.cookieValues.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let client = try RawHTTPClient(port: h.bff.port, timeout: 10)
        _ = client.send("GET /fhir/Patient/pat-1 HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: \(cookie)\r\nX-CSRF: 1\r\nX-BFF-Launch: \(launchID)\r\n\r\n")
        try await h.waitForSandbox { await $0.fhirRequests > 0 }
        #expect(await h.sandbox.state.fhirRequests == 1, "the read reached the EHR")
        client.close() // as a browser does when a fetch is aborted: a FIN
        let deadline = ContinuousClock.now + .seconds(60) // a no-hang limit only

        // Within seconds, not the EHR's 120 s: the access is in the audit trail (the EHR may
        // have read the data) and the request is counted as the client's closing.
        var metrics = ""
        while ContinuousClock.now < deadline {
            metrics = h.bff.services.metrics.render(activeSessions: nil, pool: nil, audit: h.bff.services.audit.status)
            if metrics.contains("status=\"499\"") { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(metrics.contains("bff_http_requests_total{route=\"/fhir/*\",status=\"499\"} 1"), "\(metrics)")
        #expect(countedSeries(metrics, "bff_upstream_errors_total").isEmpty, "a browser leaving is not the EHR's failure")
        await h.bff.services.audit.flush()
        let entries = try await h.database.store.auditEntries(since: nil)
        #expect(entries.map(\.pathAndQuery) == ["/Patient/pat-1"])
        #expect(entries.first?.upstreamStatus == 0)

        // The session goes on: the next read is answered.
        await h.sandbox.state.setFHIRDelay(nil)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
    }

    @Test("a browser that leaves in the middle of a streamed body: the EHR's transfer is stopped at once, the read audited with the bytes sent, not counted as the EHR's failure, and the launch reads on")
    func browserLeavesMidStream() async throws {
        // Read and stall timeouts (120 s) far beyond the test: only the browser's leaving can
        // stop the EHR's transfer within it.
        let h = try await BFFHarness.start(readTimeout: .seconds(120))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.standaloneLogin(browser).launch)
        await h.sandbox.state.resetCounters()
        let cookie = browser.cookieValues.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let port = h.bff.port, size = 64 << 20, taken = 1 << 20
        let reader = try RawHTTPClient(port: port, timeout: 30)
        defer { reader.close() }
        reader.send("GET /fhir/Binary/large?size=\(size) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nCookie: \(cookie)\r\n"
                    + "X-CSRF: 1\r\nX-BFF-Launch: \(launch)\r\n\r\n")
        // A megabyte of the body, then the connection closed with the rest unread, as when a
        // download is cancelled.
        #expect(try await runBlocking { reader.receive(atLeast: taken) })
        #expect(reader.pending.starts(with: Array("HTTP/1.1 200 ".utf8)))
        reader.close()

        // The EHR's stream is cut short within seconds. Left open, the EHR's connection would
        // be held, with the rest of the body on it, until the stall timeout or the sandbox's
        // own write timeout (30 s) gave up on it.
        try await h.waitForSandbox(within: .seconds(10)) { await $0.streamsCutShort > 0 }
        #expect(await h.sandbox.state.streamsCutShort == 1)
        #expect(await h.sandbox.state.streamsSentWhole == 0)

        await h.bff.services.audit.flush()
        let entries = try await h.database.store.auditEntries(since: nil)
        #expect(entries.map(\.pathAndQuery) == ["/Binary/large?size=\(size)"])
        let entry = try #require(entries.first)
        #expect(entry.upstreamStatus == 200)
        #expect(entry.bytes >= Int64(taken - 4096) && entry.bytes < Int64(size), "\(entry.bytes) bytes")
        let metrics = h.bff.services.metrics.render(activeSessions: nil, pool: nil, audit: h.bff.services.audit.status)
        #expect(countedSeries(metrics, "bff_upstream_errors_total").isEmpty, "a browser leaving is not the EHR's failure: \(metrics)")

        // The launch goes on: its next read gets its own resource.
        let next = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(next.status == 200 && next.text.contains("\"resourceType\":\"Patient\""), "\(next.status): \(next.text)")
    }

    @Test("one launch's many slow reads hold at most its share of the EHR's connections; another launch's read goes ahead of them")
    func launchShareOfEHRConnections() async throws {
        let h = try await BFFHarness.start(ehrConnections: (perHost: 6, reserved: 4)) // one launch holds at most 2
        defer { Task { await h.stop() } }
        let busy = Browser(client: h.client), other = Browser(client: h.client)
        let (_, busyLaunch) = try await h.standaloneLogin(busy)
        let (_, otherLaunch) = try await h.standaloneLogin(other)
        await h.sandbox.state.resetCounters()
        // Room for the other read on a loaded machine (1 s was too little beside a full run
        // under CPU burners): the busy launch's reads take 4 × 2 s.
        await h.sandbox.state.setFHIRDelay(.seconds(2))
        let busyDone = Counter()
        let reads = (0..<8).map { _ in
            Task {
                defer { busyDone.increment() }
                return try await busy.api(h.baseURL + "/fhir/Patient/pat-1", launch: busyLaunch).status
            }
        }
        try await h.waitForSandbox { await $0.delayedFHIRRequests >= 2 }
        #expect(try await other.api(h.baseURL + "/fhir/Patient/pat-1", launch: otherLaunch).status == 200)
        // Ahead of them: the busy launch's 8 reads, 2 at a time, take at least 4 × 2 s; the
        // other's one read was not queued behind them all.
        #expect(busyDone.current < 8, "the other launch's read waited for all of the busy launch's")
        for read in reads { #expect(try await read.value == 200) }
        // At most 2 of the busy launch's reads at the EHR at once, and the other launch's
        // beside them: never the 6 the EHR's connections would allow. (Exactly 3 when the
        // other read lands beside a pair; on a loaded machine it may land between two.)
        let peak = await h.sandbox.state.peakDelayedFHIRRequests
        #expect((2...3).contains(peak), "\(peak) reads at the EHR at once")
        #expect(await h.sandbox.state.fhirRequests == 9)
    }

    @Test("a read still waiting on the EHR when smart-bff stops is in the audit trail")
    func auditOfReadInFlightAtShutdown() async throws {
        // The EHR never answers within the test, nor does the BFF time out first (a timeout
        // is not a stop's cancellation), however late this task runs the stop below.
        let h = try await BFFHarness.start(readTimeout: .seconds(60))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.resetCounters()
        await h.sandbox.state.setFHIRDelay(.seconds(120)) // the sandbox's stop ends it: no one waits for it
        let read = Task { try? await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch) }
        try await h.waitForSandbox { await $0.fhirRequests > 0 }
        #expect(await h.sandbox.state.fhirRequests == 1, "the read reached the EHR")
        // The grace period ends long before the EHR answers.
        await h.bff.shutdown(gracePeriod: .milliseconds(100))
        #expect(await read.value?.status != 200)
        let entries = try await h.database.store.auditEntries(since: nil)
        #expect(entries.map(\.pathAndQuery) == ["/Patient/pat-1"])
        #expect(entries.first?.upstreamStatus == 0)
        let metrics = h.bff.services.metrics.render(activeSessions: nil, pool: nil, audit: h.bff.services.audit.status)
        #expect(countedSeries(metrics, "bff_upstream_errors_total") == ["bff_upstream_errors_total{kind=\"cancelled\"} 1"],
                "a read cut short by the stop is not the EHR's failure: \(countedSeries(metrics, "bff_upstream_errors_total"))")
    }

    @Test("every proxied read is in the audit trail")
    func audit() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        _ = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        _ = try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1", launch: launch)
        _ = try await browser.api(h.baseURL + "/fhir/Patient/nobody", launch: launch)
        await h.bff.services.audit.flush()
        try await Task.sleep(for: .milliseconds(300))
        await h.bff.services.audit.flush()
        let entries = try await h.database.store.auditEntries(since: nil)
        #expect(entries.map(\.pathAndQuery) == ["/Patient/pat-1", "/Observation?patient=pat-1", "/Patient/nobody"])
        #expect(entries.map(\.upstreamStatus) == [200, 200, 404])
        #expect(entries.allSatisfy { $0.patient == "pat-1" && $0.sub == "user-prac-1" && $0.method == "GET" })
        #expect(entries[0].bytes > 100)
        let events = entries.map { AuditEventExport.auditEvent($0) }
        for event in events {
            let parsed = try JSONParser.parse(event.serialized())
            #expect(parsed["resourceType"]?.stringValue == "AuditEvent")
            #expect(parsed["recorded"]?.stringValue?.hasSuffix("Z") == true && parsed["agent"]?.arrayValue?.count == 1)
        }
        // A search is action E ("perform a query/search operation"), with its query in entity.query (base64); reads are R.
        #expect(events.map { $0["action"]?.stringValue } == ["R", "E", "R"])
        let searched = events[1]["entity"]?.arrayValue?.first
        #expect(searched?["query"]?.stringValue == Data("patient=pat-1".utf8).base64EncodedString())
        #expect(events[0]["entity"]?.arrayValue?.first?["query"] == nil)
        // The EHR is named: the object's identifier system is its base, the patient an absolute reference under it.
        let iss = try #require(entries.first?.iss)
        #expect(searched?["what"]?["identifier"]?["system"]?.stringValue == iss)
        #expect(events[0]["entity"]?.arrayValue?.contains { $0["what"]?["reference"]?.stringValue == iss + "/Patient/pat-1" } == true)
        #expect(events.map { $0["subtype"]?.arrayValue?.first?["code"]?.stringValue } == ["read", "search-type", "read"])
        let details = events[0]["entity"]?.arrayValue?.first?["detail"]?.arrayValue ?? []
        #expect(details.contains { $0["type"]?.stringValue == "method" && $0["valueString"]?.stringValue == "GET" })
        #expect(events[2]["outcome"]?.stringValue == "4")
        #expect(events.allSatisfy { $0["extension"] == nil })
        // An entry stored escaped says so in its AuditEvent.
        var escaped = entries[0]
        escaped.textEscaped = true
        let marked = AuditEventExport.auditEvent(escaped)["extension"]?.arrayValue?.first
        #expect(marked?["url"]?.stringValue == AuditEventExport.textEscapedExtension && marked?["valueBoolean"]?.boolValue == true)
    }
}

extension FHIRProxyTests {
    /// A query the scope check and the EHR would read differently: a `#` ends what the HTTP
    /// client sends (the rest is a fragment), and a pair that does not percent-decode to
    /// UTF-8 is skipped by the check.
    @Test("a query holding # or percent-encoding that is not UTF-8 is refused, 400 with no upstream call: the scope check, the EHR and the audit trail read one query",
          arguments: ["/fhir/Observation?patient=pat-1#&category=laboratory", "/fhir/Observation?patient=pat-1&category=laboratory&category=%FF"])
    func queryReadTwoWays(_ target: String) async throws {
        let h = try await BFFHarness.start(registrations: { s, _ in
            [IssuerRegistration(iss: s.fhirBaseURL, clientID: "test-app",
                                standaloneScope: "launch/patient openid fhirUser patient/Observation.rs?category=laboratory offline_access")]
        })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.standaloneLogin(browser).launch)
        let cookie = browser.cookieValues.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        await h.sandbox.state.resetCounters()
        let port = h.bff.port
        let response = try await runBlocking {
            let c = try RawHTTPClient(port: port)
            defer { c.close() }
            c.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nCookie: \(cookie)\r\nX-CSRF: 1\r\nX-BFF-Launch: \(launch)\r\n\r\n")
            return c.readResponse()
        }
        #expect(response?.status == 400, "\(response?.status ?? 0) \(String(decoding: response?.body ?? [], as: UTF8.self))")
        #expect(await h.sandbox.state.fhirRequests == 0)
    }
}
