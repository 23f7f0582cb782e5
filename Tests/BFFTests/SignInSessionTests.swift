import BFF
import Foundation
import JSON
import PostgresStore
import Sessions
import Testing

@Suite("a sign-in in a browser that already has a session")
struct SignInSessionTests {
    @Test("a sign-in the database refuses (after the session was renamed) leaves the browser's session, cookie and launch working, and revokes the tokens it was given")
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
        await h.sandbox.state.resetCounters()
        let (failed, second) = try await h.standaloneLogin(browser, patient: "pat-2")
        #expect(failed.status == 500 && second == nil, "\(failed.status) \(failed.text)")
        #expect(await h.sandbox.state.revocations == 2, "the refused sign-in's tokens went back to the EHR")
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
        try await h.waitForSandbox(within: .seconds(10)) { await $0.revocations >= 2 } // after the answer
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

    @Test("two tabs' sign-ins whose callbacks overlap: the second joins the first's session, so the cookie the browser keeps holds every launch and no session is left behind with live tokens",
          arguments: [false, true])
    func overlappingCallbacks(earlierSession: Bool) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let earlier = earlierSession ? try await h.standaloneLogin(browser, patient: "pat-1").launch : nil
        let first = try #require(try await h.approvedCallback(browser, patient: "pat-2"))
        let second = try #require(try await h.approvedCallback(browser, patient: "pat-3"))
        // The second tab's callback is sent before the first's answer arrives: it carries the
        // cookies as they were, the first's login cookie included, and no new session cookie.
        let secondTab = browser.snapshot()
        let firstDone = try await h.finishCallback(browser, first)
        let firstCookie = try #require(browser.cookieValues["bff_session"])
        let secondDone = try await h.finishCallback(secondTab, second)
        #expect(firstDone.page.status == 302 && secondDone.page.status == 302, "\(secondDone.page.status): \(secondDone.page.text)")
        // The browser keeps the later Set-Cookie: that session holds all the launches.
        browser.setCookie("bff_session", try #require(secondTab.cookieValues["bff_session"]))
        for launch in [earlier, firstDone.launch, secondDone.launch] where launch != nil {
            #expect(try await browser.api(h.baseURL + "/context", launch: launch).status == 200)
        }
        // The first sign-in's session was taken over: its cookie opens nothing.
        let stale = Browser(client: h.client)
        stale.setCookie("bff_session", firstCookie)
        #expect(try await stale.api(h.baseURL + "/session", launch: firstDone.launch).status == 401)
        #expect(await h.sandbox.state.revocations == 0, "the same user's launches carry over, tokens and all")
    }

    @Test("two tabs' callbacks sent at the same moment by a browser with no session: one session ends up holding both launches, the other is gone")
    func simultaneousCallbacks() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        for round in 0..<3 {
            let browser = Browser(client: h.client)
            let first = try #require(try await h.approvedCallback(browser, patient: "pat-1"))
            let second = try #require(try await h.approvedCallback(browser, patient: "pat-2"))
            let tabs = [browser.snapshot(), browser.snapshot()]
            async let a = h.finishCallback(tabs[0], first)
            async let b = h.finishCallback(tabs[1], second)
            let (pageA, pageB) = try await (a, b)
            #expect(pageA.page.status == 302 && pageB.page.status == 302, "round \(round)")
            var holding: [Int] = []
            for (i, tab) in tabs.enumerated() {
                var statuses: [Int] = []
                for launch in [pageA.launch, pageB.launch] { statuses.append(try await tab.api(h.baseURL + "/context", launch: launch).status) }
                #expect(statuses == [200, 200] || statuses == [401, 401], "round \(round): a session holds one launch of two: \(statuses)")
                if statuses == [200, 200] { holding.append(i) }
            }
            #expect(holding.count == 1, "round \(round): sessions holding both launches: \(holding)")
        }
        #expect(await h.sandbox.state.revocations == 0)
    }

    @Test("a callback carrying the browser's old session, which another tab's sign-in replaced meanwhile (its login cookie not sent), joins the session that replaced it")
    func replacedByUnseenSignIn() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, earlier) = try await h.standaloneLogin(browser, patient: "pat-1")
        let first = try #require(try await h.approvedCallback(browser, patient: "pat-2"))
        let second = try #require(try await h.approvedCallback(browser, patient: "pat-3"))
        let secondTab = browser.snapshot()
        let won = try await h.finishCallback(browser, first)
        #expect(won.page.status == 302)
        // The first's login cookie (which its callback expired) was not sent with the second's.
        for name in secondTab.cookieValues.keys where name.hasPrefix("bff_login_") && browser.cookieValues[name] == nil {
            secondTab.removeCookie(name)
        }
        #expect(secondTab.cookieValues.keys.filter { $0.hasPrefix("bff_login_") }.count == 1)
        let joined = try await h.finishCallback(secondTab, second)
        #expect(joined.page.status == 302, "\(joined.page.status): \(joined.page.text)")
        browser.setCookie("bff_session", try #require(secondTab.cookieValues["bff_session"]))
        for launch in [earlier, won.launch, joined.launch] {
            #expect(try await browser.api(h.baseURL + "/context", launch: launch).status == 200)
        }
        #expect(await h.sandbox.state.revocations == 0)
    }

    @Test("a state read from a log (it travels in URLs), sent as a login cookie with an attacker's own callback, links the attacker to nothing: the victim's session is untouched")
    func leakedStateLinksNothing() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let victim = Browser(client: h.client)
        let callback = try #require(try await h.approvedCallback(victim, patient: "pat-1"))
        let done = try await h.finishCallback(victim, callback)
        let state = try #require(URLComponents(string: callback)?.queryItems?.first { $0.name == "state" }?.value)
        let attacker = Browser(client: h.client)
        let own = try #require(try await h.approvedCallback(attacker, patient: "pat-2"))
        // The login cookie's name for the victim's state, holding the state (as cookies did
        // before they held a binding), and holding a made-up binding.
        let name = "bff_login_" + Identifier.hash(state).prefix(16)
        attacker.setCookie(name, state)
        attacker.setCookie(name + "x", String(state.prefix(22)))
        #expect(try await h.finishCallback(attacker, own).page.status == 302)
        #expect(try await victim.api(h.baseURL + "/context", launch: done.launch).status == 200, "the victim's session was taken over")
        let next = try await h.standaloneLogin(victim, patient: "pat-3")
        #expect(next.page.status == 302)
        for launch in [done.launch, next.launch] {
            #expect(try await victim.api(h.baseURL + "/context", launch: launch).status == 200)
        }
    }

    @Test("a sign-in that ends another user's launches answers at once, and revokes their tokens after: an overlapping tab's sign-in cannot answer first and leave the browser a replaced session's cookie")
    func revocationAfterAnswer() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        _ = try await h.standaloneLogin(browser, patient: "pat-1") // the last clinician's
        await h.sandbox.state.setIDTokenSubject("user-prac-2")
        await h.sandbox.state.resetCounters()
        // Each revocation takes the EHR 12 s; a sign-in on a loaded machine took over 4 s, so
        // the bound below is 10 s: a sign-in that waited for the revocations takes 12 s at least.
        await h.sandbox.state.setRevocationDelay(.seconds(12))
        let started = ContinuousClock.now
        let (page, launch) = try await h.standaloneLogin(browser, patient: "pat-2")
        let took = ContinuousClock.now - started
        #expect(page.status == 302 && launch != nil)
        #expect(took < .seconds(10), "the answer waited for the EHR's revocations: \(took)")
        try await h.waitForSandbox(within: .seconds(60)) { await $0.revocations == 2 }
        #expect(await h.sandbox.state.revocations == 2, "the last clinician's refresh and access tokens")
    }

    @Test("revocations still running at the shutdown deadline are named in a warning: their tokens stay valid at the EHR until they expire")
    func revocationsCutShortAtShutdown() async throws {
        let h = try await BFFHarness.start(shutdownDeadline: .seconds(1))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        _ = try await h.standaloneLogin(browser, patient: "pat-1")
        await h.sandbox.state.setIDTokenSubject("user-prac-2")
        await h.sandbox.state.setRevocationDelay(.seconds(30))
        #expect(try await h.standaloneLogin(browser, patient: "pat-2").page.status == 302)
        await h.bff.shutdown(gracePeriod: .milliseconds(100))
        let line = h.logs.captured.first { $0.contains("token revocations cut short at shutdown") }
        #expect(line?.contains("\"level\":\"warning\"") == true, "\(h.logs.captured.suffix(5))")
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
        try await h.waitForSandbox(within: .seconds(10)) { await $0.revocations >= 2 } // after the answer
        #expect(await h.sandbox.state.revocations == 2)
    }

    @Test("an ID token whose sub holds a control character (U+0000, which PostgreSQL cannot store) is refused: 401, no session, not a 500")
    func controlCharacterInSubject() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        await h.sandbox.state.setIDTokenSubject("user-1\u{0}x")
        let (page, launch) = try await h.standaloneLogin(browser)
        #expect(page.status == 401 && page.text.contains("id-token") && launch == nil, "\(page.status): \(page.text)")
        #expect(browser.cookieValues["bff_session"] == nil)
        #expect(!h.logs.captured.contains { $0.contains("unhandled error") }, "\(h.logs.captured)")
    }

    @Test("a replaced session identifier signed in elsewhere (a copied cookie from a shared workstation) does not end the other user's session that replaced it")
    func staleIdentifierElsewhere() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let kiosk = Browser(client: h.client)
        _ = try await h.standaloneLogin(kiosk, patient: "pat-1") // the first user
        let stale = try #require(kiosk.cookieValues["bff_session"])
        await h.sandbox.state.setIDTokenSubject("user-prac-2")
        let (_, second) = try await h.standaloneLogin(kiosk, patient: "pat-2") // the next user, same browser
        try await h.waitForSandbox(within: .seconds(10)) { await $0.revocations >= 2 } // the first user's launch ended
        await h.sandbox.state.resetCounters()

        let elsewhere = Browser(client: h.client)
        elsewhere.setCookie("bff_session", stale)
        await h.sandbox.state.setIDTokenSubject("user-prac-1")
        let (page, own) = try await h.standaloneLogin(elsewhere, patient: "pat-3")
        #expect(page.status == 302 && own != nil, "\(page.status): \(page.text)")
        #expect(try await kiosk.api(h.baseURL + "/session", launch: second).status == 200, "the second user's session")
        #expect(try await kiosk.api(h.baseURL + "/fhir/Patient/pat-2", launch: second).status == 200)
        #expect(try await elsewhere.api(h.baseURL + "/session", launch: own).status == 200)
        try await Task.sleep(for: .milliseconds(300))
        #expect(await h.sandbox.state.revocations == 0, "no token of the second user's was revoked")
    }

    @Test("a login cookie left on a shared workstation (a sign-in begun and abandoned), copied and signed in elsewhere, does not end the session of the user who signed in there after")
    func abandonedLoginCookieElsewhere() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let kiosk = Browser(client: h.client)
        _ = try await h.approvedCallback(kiosk, patient: "pat-1") // the first user begins, and walks away
        let leftover = kiosk.cookieValues.filter { $0.key.hasPrefix("bff_login_") }
        #expect(leftover.count == 1)
        await h.sandbox.state.setIDTokenSubject("user-prac-2")
        let (_, second) = try await h.standaloneLogin(kiosk, patient: "pat-2") // its callback carries the leftover
        await h.sandbox.state.resetCounters()

        let elsewhere = Browser(client: h.client)
        for (name, value) in leftover { elsewhere.setCookie(name, value) }
        await h.sandbox.state.setIDTokenSubject("user-prac-1")
        let (page, own) = try await h.standaloneLogin(elsewhere, patient: "pat-3")
        #expect(page.status == 302 && own != nil, "\(page.status): \(page.text)")
        #expect(try await kiosk.api(h.baseURL + "/session", launch: second).status == 200, "the second user's session")
        try await Task.sleep(for: .milliseconds(300))
        #expect(await h.sandbox.state.revocations == 0, "no token of the second user's was revoked")
    }
}
