import BFF
import Foundation
import JSON
import PostgresStore
import Testing

@Suite("a sign-in in a browser that already has a session")
struct SignInSessionTests {
    @Test("a sign-in the database refuses (after the session was renamed) leaves the browser's session, cookie and launch working")
    func failedSignInKeepsSession() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, first) = try await h.standaloneLogin(browser, patient: "pat-1")
        let cookie = try #require(browser.cookieValues["bff_session"])
        // The launch's row is the transaction's last write: the database refuses it for pat-2.
        let admin = PostgresStoreAdmin.pool(h.database.url)
        defer { admin.close() }
        try await admin.query("""
            CREATE FUNCTION refuse_pat_2() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.patient = 'pat-2' THEN RAISE EXCEPTION 'refused for the test'; END IF; RETURN NEW; END $$
            """)
        try await admin.query("CREATE TRIGGER refuse_pat_2 BEFORE INSERT ON launches FOR EACH ROW EXECUTE FUNCTION refuse_pat_2()")
        let (failed, second) = try await h.standaloneLogin(browser, patient: "pat-2")
        #expect(failed.status == 500 && second == nil, "\(failed.status) \(failed.text)")
        #expect(failed.header("Content-Type") == "application/problem+json")
        #expect(!failed.setCookies.contains { $0.hasPrefix("bff_session=") }, "no session cookie on a failure: \(failed.setCookies)")
        #expect(browser.cookieValues["bff_session"] == cookie)
        let session = try await browser.api(h.baseURL + "/session", launch: first)
        #expect(session.status == 200 && (try? JSONParser.parse(session.body))?["patient"]?.stringValue == "pat-1", "\(session.status) \(session.text)")
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: first).status == 200, "the launch's tokens are still its own")
    }

    @Test("a token response holding U+0000 (which PostgreSQL cannot store) fails the sign-in as the EHR's fault: 502, the session kept")
    func nulInTokenResponse() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, first) = try await h.standaloneLogin(browser, patient: "pat-1")
        let cookie = try #require(browser.cookieValues["bff_session"])
        await h.sandbox.state.setTokenResponseExtras(["intent": "a\u{0}b"])
        let (failed, second) = try await h.standaloneLogin(browser, patient: "pat-2")
        #expect(failed.status == 502 && second == nil, "\(failed.status) \(failed.text)")
        #expect(failed.text.contains("NUL"), "the problem says what was wrong: \(failed.text)")
        #expect(browser.cookieValues["bff_session"] == cookie)
        #expect(try await browser.api(h.baseURL + "/session", launch: first).status == 200)
    }
}

extension SignInSessionTests {
    @Test("another user signing in in the same browser (a shared workstation) ends the first user's launch, and revokes its tokens; the same user's launches stay")
    func anotherUser() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, a) = try await h.standaloneLogin(browser, patient: "pat-1")
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: a).status == 200) // in the proxy cache now
        let firstCookie = try #require(browser.cookieValues["bff_session"])
        await h.sandbox.state.setIDTokenSubject("user-prac-2")
        await h.sandbox.state.resetCounters()
        let (_, b) = try await h.standaloneLogin(browser, patient: "pat-2")
        #expect(b != nil)
        for path in ["/session", "/context", "/fhir/Patient/pat-1"] {
            #expect(try await browser.api(h.baseURL + path, launch: a).status == 401, "\(path) with the first user's launch")
        }
        let stale = Browser(client: h.client)
        stale.setCookie("bff_session", firstCookie)
        #expect(try await stale.api(h.baseURL + "/fhir/Patient/pat-1", launch: a).status == 401)
        #expect(await h.sandbox.state.revocations == 2, "the first user's refresh and access tokens")
        // The second user's next sign-in keeps their first launch.
        let (_, c) = try await h.standaloneLogin(browser, patient: "pat-3")
        for (launch, patient) in [(b, "pat-2"), (c, "pat-3")] {
            let session = try await browser.api(h.baseURL + "/session", launch: launch)
            let json = try JSONParser.parse(session.body)
            #expect(json["sub"]?.stringValue == "user-prac-2" && json["patient"]?.stringValue == patient, "\(session.text)")
        }
        #expect(await h.sandbox.state.revocations == 2)
    }

    @Test("two tabs' sign-ins whose callbacks overlap: the second finds the session replaced and is refused (409, no cookie, its tokens revoked); no launch is lost")
    func overlappingCallbacks() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, earlier) = try await h.standaloneLogin(browser, patient: "pat-1")
        let first = try #require(try await h.approvedCallback(browser, patient: "pat-2"))
        let second = try #require(try await h.approvedCallback(browser, patient: "pat-3"))
        // Each callback waits 0.5 s at the token endpoint: the second is sent while the first
        // waits, so both carry the browser's session cookie as it was.
        await h.sandbox.state.setTokenDelay(.milliseconds(500))
        let firstDone = Task { try await h.finishCallback(browser, first) }
        try await Task.sleep(for: .milliseconds(150))
        let secondDone = try await h.finishCallback(browser, second)
        let firstPage = try await firstDone.value
        await h.sandbox.state.setTokenDelay(nil)
        // The first sign-in to store its session wins (on a loaded machine, either may).
        let (won, lost) = firstPage.page.status == 302 ? (firstPage, secondDone) : (secondDone, firstPage)
        #expect(won.page.status == 302 && won.launch != nil)
        #expect(lost.page.status == 409 && lost.page.text.contains("sign-in-overlapped"), "\(lost.page.status): \(lost.page.text)")
        #expect(!lost.page.setCookies.contains { $0.hasPrefix("bff_session=") }, "the refused sign-in set a session cookie")
        #expect(await h.sandbox.state.revocations == 2, "the refused sign-in's refresh and access tokens")
        // The browser's cookie is the winner's, and holds the earlier launch and the winner's.
        for launch in [earlier, won.launch] {
            #expect(try await browser.api(h.baseURL + "/context", launch: launch).status == 200)
        }
        // Started again, the refused sign-in joins the same session.
        let (_, again) = try await h.standaloneLogin(browser, patient: "pat-3")
        for launch in [earlier, won.launch, again] {
            #expect(try await browser.api(h.baseURL + "/context", launch: launch).status == 200)
        }
    }

    @Test("launches without a user (no openid scope) never carry over: the earlier one ends at the next sign-in")
    func noUser() async throws {
        let h = try await BFFHarness.start(registrations: { s, _ in
            [IssuerRegistration(iss: s.fhirBaseURL, clientID: "test-app", standaloneScope: "launch/patient patient/*.rs offline_access")]
        })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, a) = try await h.standaloneLogin(browser, patient: "pat-1")
        #expect(try await browser.api(h.baseURL + "/session", launch: a).status == 200)
        await h.sandbox.state.resetCounters()
        let (_, b) = try await h.standaloneLogin(browser, patient: "pat-2")
        #expect(try await browser.api(h.baseURL + "/session", launch: a).status == 401)
        #expect(try await browser.api(h.baseURL + "/session", launch: b).status == 200)
        #expect(await h.sandbox.state.revocations == 2)
    }
}
