import BFF
import BFFTesting
import Foundation
import JSON
import Testing

@Suite("operations endpoints and logs")
struct OperationsTests {
    @Test("healthz, readyz with issuer status, metrics, openapi")
    func endpoints() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        #expect(try await browser.request(h.baseURL + "/healthz").text == #"{"status":"ok"}"#)
        _ = try await h.standaloneLogin(browser)
        let ready = try await browser.request(h.baseURL + "/readyz")
        #expect(ready.status == 200)
        let json = try JSONParser.parse(ready.body)
        #expect(json["database"]?.stringValue == "up" && json["migrations"]?.stringValue == "current")
        #expect(json["issuers"]?.arrayValue?.first?["discovery"]?.stringValue == "ok")
        #expect(json["issuers"]?.arrayValue?.first?["jwks"]?.stringValue == "ok")
        let metrics = try await browser.metricsWithSessionCount(h.baseURL)
        #expect(metrics.contains("bff_http_requests_total{route=\"/callback\",status=\"302\"} 1"))
        #expect(metrics.contains("bff_active_sessions 1"))
        // Failure series are there before the first failure, at 0, for rate() and alerts to see it.
        for series in ["bff_upstream_errors_total{kind=\"timeout\"} 0", "bff_upstream_errors_total{kind=\"server_error\"} 0",
                       "bff_token_refreshes_total{outcome=\"invalid_grant\"} 0", "bff_token_refreshes_total{outcome=\"failed\"} 0"] {
            #expect(metrics.contains(series + "\n"), "\(series)")
        }
        // A read that waits out the EHR's 30 s timeout has a bucket of its own.
        #expect(metrics.contains("bff_upstream_duration_seconds_bucket{le=\"30.0\"}"), "\(metrics)")
    }

    @Test("the EHR's error answers are warnings that carry the request's id: a code exchange answered 500; FHIR reads answered 503, counted as upstream errors and logged at most once a minute, however they alternate with successes")
    func ehrErrorAnswersLogged() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.setFHIRDown(true)
        for _ in 0..<3 { #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 503) }
        await h.sandbox.state.setFHIRDown(false)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        #expect(metrics.contains("bff_upstream_errors_total{kind=\"server_error\"} 3"), "\(metrics)")
        // One line for the three, not one per read: a resource that always fails among reads
        // that succeed is no outage to announce each time.
        let failing = h.logs.captured.filter { $0.contains("FHIR reads answered with server errors") }
        #expect(failing.count == 1 && failing[0].contains("HTTP 503") && failing[0].contains("\"level\":\"warning\""), "\(failing)")
        for _ in 0..<2 {
            await h.sandbox.state.setFHIRDown(true)
            #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 503)
            await h.sandbox.state.setFHIRDown(false)
            #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        }
        #expect(h.logs.captured.filter { $0.contains("server errors") || $0.contains("answered again") }.count == 1, "\(h.logs.captured)")

        await h.sandbox.state.setTokenEndpointStatus(500)
        let (failed, _) = try await h.standaloneLogin(browser)
        #expect(failed.status == 502)
        let id = try #require(failed.header("X-Request-ID"))
        let line = try #require(h.logs.captured.first { $0.contains("code exchange failed") }, "no warning for the EHR's 500")
        #expect(line.contains("\"level\":\"warning\"") && line.contains("HTTP 500") && line.contains(id), "\(line)")
    }

    @Test("a request refused while it is read (a malformed head) is logged with its peer's address and counted under the route unparsed; a served request's line names its peer too")
    func refusedRequestsCounted() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let port = h.bffs[0].port
        let status = try await runBlocking { () throws -> Int? in
            let c = try RawHTTPClient(port: port, timeout: 10)
            c.send("GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n")
            return c.readResponse()?.status
        }
        #expect(status == 400)
        let metrics = try await Browser(client: h.client).request(h.baseURL + "/metrics").text
        #expect(metrics.contains("bff_http_requests_total{route=\"unparsed\",status=\"400\"} 1"), "\(metrics)")
        // Counted, with no time to answer: a refused request's time (a timeout's 10 s, or 0) is
        // not the server's answering time, and would skew the quantiles.
        #expect(!metrics.contains("bff_http_request_duration_seconds_count{route=\"unparsed\"}"), "\(metrics)")
        let peer = "\"network.peer.address\":\"127.0.0.1\""
        #expect(h.logs.captured.contains { $0.contains("request refused") && $0.contains("\"http.status\":\"400\"") && $0.contains(peer) },
                "\(h.logs.captured)")
        #expect(h.logs.captured.contains { $0.contains("\"request\"") && $0.contains("\"http.route\":\"/metrics\"") && $0.contains(peer) },
                "\(h.logs.captured)")
    }

    @Test("a read cut off by a stop is logged as the stop's 503, not as the EHR's 502, and is in the audit trail with no answer")
    func readCutOffByStop() async throws {
        let h = try await BFFHarness.start()
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.setFHIRDelay(.seconds(3))
        let read = Task { try? await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status }
        try await h.waitForSandbox { await $0.fhirRequests == 1 }
        await h.bff.shutdown(gracePeriod: .milliseconds(200))
        #expect(await read.value == nil, "the browser's connection is closed, with no answer")
        await h.sandbox.shutdown()
        defer { h.database.pool.close() }
        let line = try #require(h.logs.captured.first { $0.contains("\"http.route\":\"/fhir/*\"") }, "\(h.logs.captured)")
        #expect(line.contains("\"http.status\":\"503\""), "\(line)")
        #expect(!h.logs.captured.contains { $0.contains("FHIR requests to the EHR fail") }, "not the EHR's failure: \(h.logs.captured)")
        #expect(try await h.database.store.auditEntries(since: nil).map(\.upstreamStatus) == [0])
    }

    @Test("an EHR whose JWKS is down: login refused 401, and /readyz and a warning say why; the JWKS is tried again after the re-fetch interval, not at every sign-in")
    func jwksDown() async throws {
        // The next sign-in comes well within it, even on a loaded machine (6 s was exceeded
        // beside a full run under CPU burners).
        let h = try await BFFHarness.start(jwksRefetchInterval: .seconds(15))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        await h.sandbox.state.setJWKSDown(true)
        let (done, launch) = try await h.standaloneLogin(browser)
        #expect(done.status == 401 && launch == nil)
        let ready = try JSONParser.parse(try await browser.request(h.baseURL + "/readyz").body)
        let jwks = ready["issuers"]?.arrayValue?.first?["jwks"]?.stringValue ?? ""
        #expect(jwks.hasPrefix("failed: ") && jwks.contains("HTTP 503"), "\(jwks)")
        let warning = h.logs.captured.first { $0.contains("ID token rejected") }
        #expect(warning?.contains("\"level\":\"warning\"") == true && warning?.contains("HTTP 503") == true, "\(warning ?? "")")

        await h.sandbox.state.setJWKSDown(false)
        #expect(try await h.standaloneLogin(browser).page.status == 401, "within the interval the failed fetch stands")
        #expect(await h.bffs[0].services.jwks.fetchCount.values.reduce(0, +) == 1)
        try await Task.sleep(for: .seconds(15))
        #expect(try await h.standaloneLogin(browser).page.status == 302)
        let recovered = try JSONParser.parse(try await browser.request(h.baseURL + "/readyz").body)
        #expect(recovered["issuers"]?.arrayValue?.first?["jwks"]?.stringValue == "ok")
    }

    @Test("a JWKS outage while the cached keys still verify: sign-in works, and /readyz and a warning say the JWKS cannot be fetched")
    func jwksStale() async throws {
        let h = try await BFFHarness.start(jwksMaxAge: .seconds(1))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        #expect(try await h.standaloneLogin(browser).page.status == 302)
        await h.sandbox.state.setJWKSDown(true)
        // Past the cached set's 1 s and the re-fetch limit (one attempt per issuer every 10 s):
        // the next sign-in fetches the set again, which fails, and the cached keys verify.
        try await Task.sleep(for: .seconds(11))
        #expect(try await h.standaloneLogin(browser).page.status == 302, "the cached keys still verify")
        let ready = try JSONParser.parse(try await browser.request(h.baseURL + "/readyz").body)
        let jwks = ready["issuers"]?.arrayValue?.first?["jwks"]?.stringValue ?? ""
        #expect(jwks.hasPrefix("stale: ") && jwks.contains("HTTP 503"), "\(jwks)")
        #expect(h.logs.captured.contains { $0.contains("EHR JWKS could not be fetched") && $0.contains("\"level\":\"warning\"") })

        await h.sandbox.state.setJWKSDown(false)
        try await Task.sleep(for: .seconds(11)) // the re-fetch limit: one attempt per issuer every 10 s
        #expect(try await h.standaloneLogin(browser).page.status == 302)
        let recovered = try JSONParser.parse(try await browser.request(h.baseURL + "/readyz").body)
        #expect(recovered["issuers"]?.arrayValue?.first?["jwks"]?.stringValue == "ok")
    }

    @Test("readyz is 503 while the database is down and 200 again when it is back")
    func readyzRecovers() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        try await PostgresStoreAdmin.takeAway(h.database.url)
        #expect(try await browser.request(h.baseURL + "/readyz").status == 503)
        #expect(try await browser.request(h.baseURL + "/healthz").status == 200)
        try await PostgresStoreAdmin.bringBack(h.database.url)
        var status = 0
        for _ in 0..<30 where status != 200 {
            status = try await browser.request(h.baseURL + "/readyz").status
            if status != 200 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(status == 200)
    }

    @Test("while the database is away, session reads answer 503 database-unavailable, counted in /metrics, with one log line for the outage (not one per request); the session works again after")
    func databaseOutage() async throws {
        let h = try await BFFHarness.start(proxyCacheSeconds: 0)
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        try await PostgresStoreAdmin.takeAway(h.database.url)
        for path in ["/session", "/fhir/Patient/pat-1", "/session", "/context", "/session"] {
            let page = try await browser.api(h.baseURL + path, launch: launch)
            #expect(page.status == 503, "\(path): \(page.status)")
            #expect(page.text.contains("database-unavailable"), "\(path): \(page.text)")
        }
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        let counted = metrics.split(separator: "\n").first { $0.hasPrefix("bff_database_errors_total ") }.flatMap { Int($0.split(separator: " ")[1]) }
        #expect((counted ?? 0) >= 2, "\(counted.map(String.init) ?? "no bff_database_errors_total")")
        try await PostgresStoreAdmin.bringBack(h.database.url)
        var status = 0
        for _ in 0..<50 where status != 200 {
            status = try await browser.api(h.baseURL + "/session", launch: launch).status
            if status != 200 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(status == 200, "the session did not survive the outage")
        let logs = h.logs.captured
        let outage = logs.filter { $0.contains("the database cannot serve requests") }
        #expect(outage.count == 1, "\(outage)")
        #expect(outage.first?.contains("cannot connect to PostgreSQL") == true, "the line does not say why: \(outage)")
        // A request's own lines carry its id: none but the access log's may be about the database.
        let perRequest = logs.filter { $0.contains("database error: ") && $0.contains("bff.request.id") }
        #expect(perRequest.isEmpty, "a database error line per request: \(perRequest)")
    }

    @Test("no response to the front end and no log line contains a token the EHR issued, a code or a cookie")
    func nothingLeaks() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (done, launch) = try await h.standaloneLogin(browser)
        var pages = [done]
        for path in ["/session", "/context", "/fhir/Patient/pat-1", "/fhir/Observation?patient=pat-1", "/readyz", "/metrics"] {
            pages.append(try await browser.api(h.baseURL + path, launch: launch))
        }
        await h.sandbox.state.expireAccessTokens()
        pages.append(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch))
        let tokens = try await h.bff.services.store.tokens(launchHash: try #require(await h.bff.services.store.findLaunch(sessionID: browser.cookieValues["bff_session"]!, launchID: launch)).idHash)!
        let secrets = [tokens.accessToken, tokens.refreshToken!, tokens.idToken!, browser.cookieValues["bff_session"]!]
        let text = pages.map { $0.text + $0.headers.filter { $0.name != "Set-Cookie" }.map { $0.value }.joined() }.joined()
        let logs = h.logs.captured.joined(separator: "\n")
        #expect(logs.contains("\"http.route\":\"/fhir/*\""))
        for secret in secrets {
            #expect(!text.contains(secret))
            #expect(!logs.contains(secret))
        }
        #expect(!logs.contains("code=") && !logs.contains("state="))
    }
}
