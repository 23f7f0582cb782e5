@testable import BFF
import Foundation
import JSON
import PostgresStore
import Sandbox
import Sessions
import Testing

@Suite("token refresh")
struct RefreshTests {
    @Test("two instances, an expired access token, 32 concurrent reads: all succeed and the EHR sees one refresh")
    func singleFlightAcrossInstances() async throws {
        let h = try await BFFHarness.start(instances: 2)
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try await h.signInWithExpiredAccessTokens([browser])[0]
        await h.sandbox.state.resetCounters()
        #expect(browser.cookieValues["bff_session"] != nil)
        let statuses = try await browser.concurrentReads(32, of: "/fhir/Patient/pat-1", launch: launch,
                                                         over: h.bffs.map { "http://127.0.0.1:\($0.port)" })
        #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)")
        #expect(await h.sandbox.state.refreshCount == 1)
    }

    @Test("an access token that lives 40 s (less than the 60 s margin) is not refreshed on every read: its margin is half its life")
    func shortLivedTokens() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        await h.sandbox.state.setAccessTokenLifetime(40) // inside the fixed 60 s margin
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.resetCounters()
        for _ in 0..<5 { #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200) }
        #expect(await h.sandbox.state.refreshCount == 0, "a 40 s token was refreshed before half its life")
    }

    @Test("an early refresh runs in the background: while the EHR cannot make it, reads go on with the token (200), the endpoint asked again only after 5 s; once the EHR refuses the token, 503, the session kept")
    func earlyRefreshFailure() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        // Refreshed early once 15 s are left: 14.5 s of slack for a loaded machine's slow refresh
        // and reads (a full run has taken over 10 s).
        await h.sandbox.state.setAccessTokenLifetime(30)
        let (_, launch) = try await h.standaloneLogin(browser)
        let signedIn = ContinuousClock.now
        await h.sandbox.state.setAccessTokenLifetime(3600)
        await h.sandbox.state.setTokenEndpointStatus(503)
        await h.sandbox.state.resetCounters()
        try await Task.sleep(until: signedIn + .seconds(15.5))
        let early = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(early.status == 200, "\(early.status): \(early.text)")
        try await h.waitForSandbox(within: .seconds(10)) { await $0.tokenRequests >= 1 } // in the background
        #expect(await h.sandbox.state.tokenRequests == 1, "the refresh was tried")
        // More reads within 5 s of the failure go on with the token and do not ask again.
        for _ in 0..<5 { #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200) }
        #expect(await h.sandbox.state.tokenRequests == 1, "the token endpoint asked at the rate of reads")
        // Once the EHR refuses the token (401), the refresh it needs must be made: 503 while it cannot.
        await h.sandbox.state.expireAccessTokens()
        let refused = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(refused.status == 503 && refused.text.contains("refresh-unavailable"), "\(refused.status): \(refused.text)")
        await h.sandbox.state.setTokenEndpointStatus(nil)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
    }

    @Test("a launch the EHR gave no refresh token: used until it expires, then it ends alone (401), its token revoked; the browser's other launch reads on")
    func launchWithoutRefreshToken() async throws {
        let h = try await BFFHarness.start(proxyCacheSeconds: 0) // each read sees the token's expiry as stored
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, first) = try await h.standaloneLogin(browser) // with a refresh token
        await h.sandbox.state.setTokenResponseExtras(["refresh_token": nil])
        let short = try #require(try await h.standaloneLogin(browser).launch)
        await h.sandbox.state.resetCounters()
        // Its expiry as the BFF knows it, moved (the EHR takes the token all along).
        func expires(in seconds: Int) async throws {
            try await h.database.pool.query("""
                UPDATE tokens SET access_expires_at = now() + make_interval(secs => \(seconds)) WHERE launch_hash = \(Identifier.hash(short))
                """)
        }
        // Inside the refresh margin, not expired: used as it is (nothing to refresh with).
        try await expires(in: 20)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: short).status == 200)
        #expect(await h.sandbox.state.tokenRequests == 0)
        // Expired: this launch ends, alone.
        try await expires(in: -1)
        let ended = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: short)
        #expect(ended.status == 401 && ended.text.contains("no refresh token"), "\(ended.status): \(ended.text)")
        #expect(await h.sandbox.state.tokenRequests == 0)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: short).status == 401)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: first).status == 200)
        let deadline = ContinuousClock.now + .seconds(10) // the spent access token is revoked in the background
        while await h.sandbox.state.revocations < 1, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(await h.sandbox.state.revocations == 1)
        let metrics = try await browser.request(h.baseURL + "/metrics").text
        #expect(metrics.contains("bff_token_refreshes_total{outcome=\"no_refresh_token\"} 1"))
    }

    @Test("the database connection holding a refresh's lock is lost while the EHR answers: the rotated tokens are stored on a second try, the session goes on")
    func refreshStoredAfterLostConnection() async throws {
        // The read's outcome is under test, not the refresh deadline, which a loaded full run
        // has come near (the lock, the lost statement and a second transaction took 10 s):
        // 25 s, under the test client's own 30 s read timeout.
        let h = try await BFFHarness.start(refreshDeadline: .seconds(25))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.signInWithExpiredAccessTokens([browser])[0])
        await h.sandbox.state.resetCounters()
        await h.sandbox.state.holdTokenAnswers(true) // the EHR answers the refresh once its lock holder is found and ended
        let read = Task { try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status }
        // While the EHR has the request, the connection that holds the token row lock is
        // ended (a failover, a DBA's kill).
        try await h.untilTheEHRHasARefreshRequest()
        var ended = 0
        let deadline = ContinuousClock.now + .seconds(10)
        while ended == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            ended = try await h.database.pool.query("""
                SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                WHERE datname = current_database() AND state = 'idle in transaction'
                  AND query LIKE '%FROM tokens%FOR UPDATE%' AND pid <> pg_backend_pid()
                """).first?.int(0) ?? 0
        }
        #expect(ended == 1)
        await h.sandbox.state.holdTokenAnswers(false)
        let status = try await read.value
        #expect(status == 200)
        #expect(try await h.tokenVersion(of: launch) == 2) // the EHR's answer stored
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        #expect(await h.sandbox.state.refreshCount == 1)
    }

    @Test("the database goes away for seconds while the EHR answers a refresh (a failover): the rotated tokens are stored once it is back, and the session goes on")
    func refreshStoredAfterOutage() async throws {
        let h = try await BFFHarness.start(refreshDeadline: .seconds(25))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.signInWithExpiredAccessTokens([browser])[0])
        let read = try await h.readWhoseRefreshIsAnsweredWhileTheDatabaseIsAway(browser, launch: launch)
        try await Task.sleep(for: .seconds(3))
        try await PostgresStoreAdmin.bringBack(h.database.url)
        let status = try await read.value
        #expect(status == 200)
        #expect(try await h.tokenVersion(of: launch) == 2, "the EHR's answer was not stored")
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        #expect(await h.sandbox.state.refreshCount == 1)
        #expect(await h.sandbox.state.liveRefreshTokens == 1, "the rotated refresh token was revoked or lost")
    }

    @Test("a logout while a refresh's answer waits for the database to come back: the tokens that answer brought are revoked too, nothing the EHR issued stays live")
    func logoutWhileTheAnswerWaitsForTheDatabase() async throws {
        let h = try await BFFHarness.start(refreshDeadline: .seconds(25))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.signInWithExpiredAccessTokens([browser])[0])
        let read = try await h.readWhoseRefreshIsAnsweredWhileTheDatabaseIsAway(browser, launch: launch)
        // Long enough for the tries to be 2 s apart: the logout below lands between two.
        try await Task.sleep(for: .milliseconds(5_500))
        try await PostgresStoreAdmin.bringBack(h.database.url)
        #expect(try await browser.api("POST", h.baseURL + "/logout").status == 204)
        _ = try await read.value
        let deadline = ContinuousClock.now + .seconds(30) // revocations run in the background
        while await h.sandbox.state.liveRefreshTokens + h.sandbox.state.liveAccessTokens > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(await h.sandbox.state.liveRefreshTokens == 0, "the refresh's new refresh token was not revoked")
        #expect(await h.sandbox.state.liveAccessTokens == 0, "the refresh's new access token was not revoked")
    }

    @Test("an EHR's answer that could not be stored is revoked only when the launch cannot go on without it (its refresh token used up by rotation)")
    func unstoredAnswerRevocation() {
        let answer = TokenSet(accessToken: "new-access", refreshToken: "kept", idToken: nil, accessTokenExpiresAt: nil, responseJSON: "{}", version: 2)
        #expect(!TokenRefresher.isToBeRevoked(answer, held: "kept"), "an EHR that does not rotate: the launch goes on with the grant")
        #expect(TokenRefresher.isToBeRevoked(answer, held: "the old one"), "rotated: the launch's refresh token is used up")
    }

    @Test("an upstream 401 refreshes once and retries; a response without a new refresh token keeps the old one")
    func refreshAfter401() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.setRotateRefreshTokens(false)
        await h.sandbox.state.expireAccessTokens()
        await h.sandbox.state.resetCounters()
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        #expect(await h.sandbox.state.refreshCount == 1)
        await h.sandbox.state.expireAccessTokens()
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        #expect(await h.sandbox.state.refreshCount == 2) // the kept refresh token still works
        // Each read the EHR refused is in the audit trail, as is its retry.
        await h.bff.services.audit.flush()
        #expect(try await h.database.store.auditEntries(since: nil).map(\.upstreamStatus) == [401, 200, 401, 200])
    }

    @Test("a refresh that answers a wider scope widens nothing: /session keeps the launch's scope, and a type outside it is still 403 with no upstream call")
    func refreshCannotWidenScope() async throws {
        let launchScope = "launch/patient openid fhirUser patient/Patient.rs offline_access"
        let h = try await BFFHarness.start(registrations: { s, _ in
            [IssuerRegistration(iss: s.fhirBaseURL, clientID: "test-app", standaloneScope: launchScope)]
        })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        #expect(try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1", launch: launch).status == 403)
        await h.sandbox.state.setRefreshScope("launch/patient openid fhirUser patient/*.rs user/*.cruds offline_access")
        await h.sandbox.state.expireAccessTokens()
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200) // 401, refresh, retry
        #expect(await h.sandbox.state.refreshCount == 1)
        let session = try JSONParser.parse(try await browser.api(h.baseURL + "/session", launch: launch).body)
        let scope = try #require(session["scope"]?.stringValue)
        #expect(Set(scope.split(separator: " ")) == Set(launchScope.split(separator: " ")), "\(scope)")
        await h.sandbox.state.resetCounters()
        #expect(try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1", launch: launch).status == 403)
        #expect(await h.sandbox.state.fhirRequests == 0)
    }

    @Test("a refresh that narrows the scope narrows what the launch may read: /session says so, and an Observation search is 403 with no upstream call")
    func refreshNarrowsScope() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        #expect(try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1", launch: launch).status == 200)
        let narrower = "launch/patient openid fhirUser patient/Patient.rs offline_access"
        await h.sandbox.state.setRefreshScope(narrower)
        await h.sandbox.state.expireAccessTokens()
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200) // 401, refresh, retry
        #expect(await h.sandbox.state.refreshCount == 1)
        let session = try JSONParser.parse(try await browser.api(h.baseURL + "/session", launch: launch).body)
        #expect(session["scope"]?.stringValue == narrower)
        await h.sandbox.state.resetCounters()
        let refused = try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1", launch: launch)
        #expect(refused.status == 403 && refused.text.contains("/problems/scope"), "\(refused.status)")
        #expect(await h.sandbox.state.fhirRequests == 0)
    }

    @Test("a refresh refused with another error is 503, the session kept; the EHR's error is shown only when it is an error code")
    func refreshErrorShown() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.expireAccessTokens()
        await h.sandbox.state.setRefreshError("invalid_client")
        let plain = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(plain.status == 503 && plain.text.contains("(invalid_client)"), "\(plain.status): \(plain.text)")
        // An EHR that echoes what it was sent could put a token in its error.
        await h.sandbox.state.setRefreshError("invalid_request refresh_token=rt-0123456789")
        let echoed = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(echoed.status == 503 && !echoed.text.contains("rt-0123456789") && echoed.text.contains("an error value not shown"),
                "\(echoed.status): \(echoed.text)")
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 200)
    }

    @Test("invalid_grant ends the session: 401 with a session-ended problem, then no session")
    func invalidGrant() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.expireAccessTokens()
        await h.sandbox.state.setRefreshError("invalid_grant")
        let page = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(page.status == 401)
        #expect(try JSONParser.parse(page.body)["type"]?.stringValue?.hasSuffix("session-ended") == true)
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 401)
        // The read reached the EHR (which refused it): it is in the audit trail.
        await h.bff.services.audit.flush()
        #expect(try await h.database.store.auditEntries(since: nil).map(\.upstreamStatus) == [401])
    }

    @Test("invalid_grant in the body of a status that is no OAuth error response (302, 403) is not the EHR refusing the grant: 503, the session kept",
          arguments: [302, 403])
    func invalidGrantBodyOtherStatus(status: Int) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.expireAccessTokens()
        await h.sandbox.state.setTokenEndpointStatus(status, error: "invalid_grant")
        let page = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(page.status == 503, "\(page.status): \(page.text)")
        await h.sandbox.state.setTokenEndpointStatus(nil)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200, "the session lives on")
    }

    @Test("invalid_grant with reads waiting on two instances: the EHR is asked once, every read is 401, the session is gone")
    func invalidGrantAcrossInstances() async throws {
        let h = try await BFFHarness.start(instances: 2)
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try await h.signInWithExpiredAccessTokens([browser])[0]
        await h.sandbox.state.setRefreshError("invalid_grant")
        await h.sandbox.state.setTokenDelay(.seconds(1)) // the other instance queues on the row lock meanwhile
        await h.sandbox.state.resetCounters()
        let statuses = try await browser.concurrentReads(8, of: "/fhir/Patient/pat-1", launch: launch,
                                                         over: h.bffs.map { "http://127.0.0.1:\($0.port)" })
        #expect(statuses == Array(repeating: 401, count: 8), "\(statuses)")
        #expect(await h.sandbox.state.refreshCount == 1, "the refused refresh token was sent again")
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 401)
    }

    /// `evicted`: the failing launch's entry leaves the proxy's cache while the EHR takes its
    /// time to refuse (as an entry does when it expires, when the cache is full, or when an
    /// invalidation races its lookup); the other launch's stays.
    @Test("invalid_grant on one launch ends the session's other launches at once, with no call to the EHR, cached failing launch or not",
          arguments: [false, true])
    func invalidGrantEndsTheOtherLaunches(evicted: Bool) async throws {
        let h = try await BFFHarness.start(proxyCacheSeconds: 300)
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, first) = try await h.standaloneLogin(browser)
        let (_, second) = try await h.standaloneLogin(browser)
        #expect(first != nil && second != nil && first != second)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: second).status == 200) // now in the proxy's cache
        await h.sandbox.state.expireAccessTokens()
        await h.sandbox.state.setRefreshError("invalid_grant")
        if evicted { await h.sandbox.state.setTokenDelay(.seconds(1)) }
        await h.sandbox.state.resetCounters()
        let failing = Task { try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: first).status }
        if evicted {
            try await h.untilTheEHRHasARefreshRequest()
            h.bff.services.proxyCache.invalidate(launchHash: Identifier.hash(try #require(first)))
        }
        #expect(try await failing.value == 401)
        // The other launch's grant is revoked at the EHR as at logout (access and refresh
        // token), after the 401: in a task of its own.
        for _ in 0..<100 where await h.sandbox.state.revocations < 2 { try await Task.sleep(for: .milliseconds(50)) }
        #expect(await h.sandbox.state.revocations == 2)
        await h.sandbox.state.resetCounters()
        let other = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: second)
        #expect(other.status == 401)
        #expect(await h.sandbox.state.fhirRequests == 0, "the EHR was asked on behalf of a session that had ended")
    }

    @Test("a logout in another tab while a refresh waits for its turn answers that refresh 401 (the session ended), not 500")
    func logoutDuringRefresh() async throws {
        let h = try await BFFHarness.start() // a pool of 4: one refresh holds a connection at a time
        defer { Task { await h.stop() } }
        let (busy, leaving) = (Browser(client: h.client), Browser(client: h.client))
        let launches = try await h.signInWithExpiredAccessTokens([busy, leaving])
        let (busyLaunch, leavingLaunch) = (launches[0], launches[1])
        await h.sandbox.state.resetCounters()
        await h.sandbox.state.holdTokenAnswers(true) // until the logout is done
        let busyRead = Task { try await busy.api(h.baseURL + "/fhir/Patient/pat-1", launch: busyLaunch).status }
        try await h.untilTheEHRHasARefreshRequest()
        // This refresh has read its tokens and waits for the busy one's slot when the logout comes.
        let leavingRead = Task { try await leaving.api(h.baseURL + "/fhir/Patient/pat-1", launch: leavingLaunch) }
        let queued = ContinuousClock.now + .seconds(10)
        while h.bff.refreshesWaitingForTheirTurn == 0, ContinuousClock.now < queued { try await Task.sleep(for: .milliseconds(20)) }
        try #require(h.bff.refreshesWaitingForTheirTurn == 1, "the second refresh did not wait for the first's slot")
        #expect(try await leaving.api("POST", h.baseURL + "/logout").status == 204)
        await h.sandbox.state.holdTokenAnswers(false)
        let page = try await leavingRead.value
        #expect(page.status == 401, "\(String(decoding: page.body, as: UTF8.self))")
        let busyStatus = try await busyRead.value
        #expect(busyStatus == 200)
    }

    @Test("a logout while a refresh waits on the EHR revokes the tokens the refresh brings, not the ones it replaced")
    func logoutDuringRefreshRevokesTheNewTokens() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.setRotateRefreshTokens(true) // the old refresh token is used up as the EHR answers
        await h.sandbox.state.expireAccessTokens()
        await h.sandbox.state.setTokenDelay(.seconds(2))
        await h.sandbox.state.resetCounters()
        let read = Task { try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status }
        try await h.untilTheEHRHasARefreshRequest()
        #expect(try await browser.api("POST", h.baseURL + "/logout").status == 204)
        _ = try await read.value
        // Nothing the EHR issued for this session can still be used.
        #expect(await h.sandbox.state.liveRefreshTokens == 0, "the refresh's new refresh token was not revoked")
        #expect(await h.sandbox.state.liveAccessTokens == 0, "the refresh's new access token was not revoked")
        #expect(await h.sandbox.state.revocations == 2)
    }

    @Test("an EHR outage during refresh is 503 and keeps the session, whatever error its 5xx body names; it recovers",
          arguments: ["temporarily_unavailable", "invalid_grant"])
    func outageDuringRefresh(error: String) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.expireAccessTokens()
        await h.sandbox.state.setTokenEndpointStatus(503, error: error)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 503)
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 200)
        await h.sandbox.state.setTokenEndpointStatus(nil)
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        // Both reads reached the EHR, which refused the expired token each time; the second
        // was retried after the refresh.
        await h.bff.services.audit.flush()
        #expect(try await h.database.store.auditEntries(since: nil).map(\.upstreamStatus) == [401, 401, 200])
    }

    @Test("a refresh the EHR answers after the deadline: 503 then, and what the EHR answered is stored, so a rotated refresh token is not lost")
    func lateAnswerKept() async throws {
        let h = try await BFFHarness.start(refreshDeadline: .seconds(1))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.signInWithExpiredAccessTokens([browser])[0])
        let launchHash = Identifier.hash(launch)
        let before = try #require(try await h.bff.services.store.tokens(launchHash: launchHash)).version
        await h.sandbox.state.resetCounters()
        await h.sandbox.state.setRotateRefreshTokens(true) // the EHR uses up the old refresh token as it answers
        await h.sandbox.state.setTokenDelay(.seconds(3))
        let late = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(late.status == 503 && late.text.contains("refresh-unavailable"), "\(late.status) \(late.text)")
        await h.sandbox.state.setTokenDelay(nil)
        // The request goes on; once the EHR answers, the new tokens are stored.
        for _ in 0..<150 where try await h.bff.services.store.tokens(launchHash: launchHash)?.version == before {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        #expect(await h.sandbox.state.refreshCount == 1)
        // The rotated refresh token is the one stored: the next refresh works.
        await h.sandbox.state.expireAccessTokens()
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        #expect(await h.sandbox.state.refreshCount == 2)
    }

    @Test("a refresh waiting on the EHR when smart-bff stops is let finish: what the EHR answered is stored before the pool closes")
    func shutdownKeepsARefreshUnderWay() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.signInWithExpiredAccessTokens([browser])[0])
        await h.sandbox.state.setRotateRefreshTokens(true)
        await h.sandbox.state.setTokenDelay(.seconds(2))
        await h.sandbox.state.resetCounters()
        let read = Task { try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status }
        try await h.untilTheEHRHasARefreshRequest()
        await h.bff.shutdown(gracePeriod: .milliseconds(100)) // the read gives up; the refresh does not
        _ = try? await read.value
        #expect(try await h.tokenVersion(of: launch) == 2, "the refresh's new tokens were not stored")
        #expect(await h.sandbox.state.liveRefreshTokens == 1, "the one refresh token the EHR still takes")
    }

    @Test("a refresh still waiting for its turn when smart-bff begins to stop sends nothing: every request sent is one shutdown waits for")
    func noRefreshSentOnceStopping() async throws {
        let h = try await BFFHarness.start() // a pool of 4: one refresh holds a connection at a time
        defer { Task { await h.stop() } }
        let (first, second) = (Browser(client: h.client), Browser(client: h.client))
        let launches = try await h.signInWithExpiredAccessTokens([first, second])
        await h.sandbox.state.setRotateRefreshTokens(true)
        await h.sandbox.state.setTokenDelay(.seconds(2))
        await h.sandbox.state.resetCounters()
        let firstRead = Task { try await first.api(h.baseURL + "/fhir/Patient/pat-1", launch: launches[0]).status }
        try await h.untilTheEHRHasARefreshRequest()
        let secondRead = Task { try await second.api(h.baseURL + "/fhir/Patient/pat-1", launch: launches[1]).status }
        try await Task.sleep(for: .milliseconds(300)) // the second refresh waits for the first's slot
        await h.bff.shutdown(gracePeriod: .milliseconds(100))
        _ = try? await firstRead.value
        _ = try? await secondRead.value
        #expect(await h.sandbox.state.refreshCount == 1, "a refresh was sent after shutdown began")
        var versions: [Int?] = []
        for launch in launches { versions.append(try await h.tokenVersion(of: try #require(launch))) }
        #expect(versions == [2, 1], "the first refresh stored, the second launch's tokens as they were: \(versions)")
        #expect(await h.sandbox.state.liveRefreshTokens == 2)
    }

    @Test("invalid_grant answers 401 at once, while the session's other grants are revoked at an EHR that takes its time")
    func invalidGrantDoesNotWaitForRevocations() async throws {
        // A read that waited for the revocations (40 s) would answer 503 at the refresh
        // deadline (15 s); the refresh itself has all that time, on a loaded machine too.
        let h = try await BFFHarness.start(refreshDeadline: .seconds(15))
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, first) = try await h.standaloneLogin(browser)
        let (_, second) = try await h.standaloneLogin(browser)
        #expect(first != nil && second != nil)
        await h.sandbox.state.expireAccessTokens()
        await h.sandbox.state.setRefreshError("invalid_grant")
        await h.sandbox.state.setRevocationDelay(.seconds(40))
        let page = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: first)
        #expect(page.status == 401 && page.text.contains("session-ended"), "\(page.status): \(page.text)")
        #expect(try await browser.api(h.baseURL + "/session", launch: second).status == 401)
    }

    @Test("a refresh answered with expires_in 0 keeps the rotated refresh token: the read succeeds, and later refreshes work")
    func nonPositiveExpiresIn() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        await h.sandbox.state.setRotateRefreshTokens(true) // the EHR uses up the old refresh token as it answers
        await h.sandbox.state.expireAccessTokens()
        await h.sandbox.state.setTokenResponseExtras(["expires_in": 0])
        let page = try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch)
        #expect(page.status == 200, "\(page.status) \(page.text)")
        await h.sandbox.state.setTokenResponseExtras([:])
        await h.sandbox.state.expireAccessTokens() // the EHR refuses the token: one refresh, with the rotated refresh token
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
        #expect(await h.sandbox.state.refreshCount == 2)
    }

    @Test("an EHR whose token endpoint hangs holds one refresh's connection, not the pool: other requests answer at once, and the refreshes answer 503 by their deadline, the sessions kept")
    func hangingTokenEndpoint() async throws {
        let deadline = Duration.seconds(10)
        // A pool of 4: one refresh holds a connection at a time. The request sent to the EHR
        // is not abandoned at the deadline: it ends at the 12 s read timeout.
        let h = try await BFFHarness.start(readTimeout: .seconds(12), refreshDeadline: deadline)
        defer { Task { await h.stop() } }
        let browsers = (0..<4).map { _ in Browser(client: h.client) }
        let expiring = Array(zip(browsers, try await h.signInWithExpiredAccessTokens(browsers)))
        let healthy = Browser(client: h.client)
        let (_, healthyLaunch) = try await h.standaloneLogin(healthy)
        await h.sandbox.state.resetCounters()
        await h.sandbox.state.setTokenDelay(.seconds(120))

        let started = ContinuousClock.now
        let reads = Task {
            try await withThrowingTaskGroup(of: (status: Int, took: Duration).self) { group in
                for (browser, launch) in expiring {
                    group.addTask { (try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status, ContinuousClock.now - started) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        // Once one refresh waits on the EHR, the others get 2 s to reach it too (as they all
        // would, each holding a connection, if nothing held them back).
        try await h.untilTheEHRHasARefreshRequest()
        let settled = ContinuousClock.now + .seconds(2)
        while await h.sandbox.state.refreshCount < expiring.count, ContinuousClock.now < settled { try await Task.sleep(for: .milliseconds(20)) }

        let asked = ContinuousClock.now
        #expect(try await healthy.api(h.baseURL + "/session", launch: healthyLaunch).status == 200)
        // Without the limit it waits for a refresh to give its connection back (8 s here).
        #expect(ContinuousClock.now - asked < .seconds(4), "a request of another session waited for the refreshes")
        let answers = try await reads.value
        #expect(answers.map(\.status) == Array(repeating: 503, count: expiring.count), "\(answers)")
        // No-hang bound for a loaded machine; without the deadline the first answer comes at
        // the 30 s read timeout, and the rest one by one after it.
        #expect(answers.allSatisfy { $0.took < deadline + .seconds(8) }, "\(answers)")

        // The EHR answers again. A read may still meet the hung request (until its read
        // timeout) and answer 503; the session is kept throughout, and reads work again.
        await h.sandbox.state.setTokenDelay(nil)
        let (browser, launch) = expiring[0]
        var statuses: [Int] = []
        while statuses.last != 200, statuses.count < 5 {
            statuses.append(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status)
        }
        #expect(statuses.last == 200 && statuses.allSatisfy { $0 == 200 || $0 == 503 }, "\(statuses)")
    }

    @Test("a database's short statement_timeout and idle_in_transaction_session_timeout do not break a refresh that waits on the EHR, nor another instance's wait for it")
    func shortDatabaseTimeouts() async throws {
        let h = try await BFFHarness.start(instances: 2)
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try await h.signInWithExpiredAccessTokens([browser])[0]
        // A DBA's limits, far shorter than the EHR's answer; the pools' connections are cut,
        // so that the ones they open next have them.
        try await PostgresStoreAdmin.setting(h.database.url, "statement_timeout", to: "250ms")
        try await PostgresStoreAdmin.setting(h.database.url, "idle_in_transaction_session_timeout", to: "250ms")
        try await PostgresStoreAdmin.takeAway(h.database.url)
        try await PostgresStoreAdmin.bringBack(h.database.url)
        await h.sandbox.state.resetCounters()
        await h.sandbox.state.setTokenDelay(.seconds(2))

        let first = Task { try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status }
        try await h.untilTheEHRHasARefreshRequest()
        // The first instance holds the token row lock until the EHR answers: the second waits for it.
        let second = try await browser.api("http://127.0.0.1:\(h.bffs[1].port)/fhir/Patient/pat-1", launch: launch)
        #expect(second.status == 200, "\(String(decoding: second.body, as: UTF8.self))")
        #expect(try await first.value == 200)
        #expect(await h.sandbox.state.refreshCount == 1)

        // The rotated refresh token was stored: the next refresh works.
        await h.sandbox.state.setTokenDelay(nil)
        await h.sandbox.state.expireAccessTokens()
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200)
    }
}

extension BFFHarness {
    /// Signs each browser in with access tokens that live 1 s (the shortest life a token
    /// response gives), waits until they have expired, and puts the EHR back to hour-long
    /// tokens: the next read of each launch refreshes. Returns the launches in order.
    func signInWithExpiredAccessTokens(_ browsers: [Browser]) async throws -> [String?] {
        await sandbox.state.setAccessTokenLifetime(1)
        var launches: [String?] = []
        for browser in browsers { launches.append(try await standaloneLogin(browser).launch) }
        await sandbox.state.setAccessTokenLifetime(3600)
        try await Task.sleep(for: .seconds(1))
        return launches
    }

    /// A read of `launch` (expired) whose refresh the EHR answers, rotating the refresh token,
    /// once the database has gone away (every connection cut, none let in): the answer cannot
    /// be stored until `PostgresStoreAdmin.bringBack`. Returns the read's status to come.
    func readWhoseRefreshIsAnsweredWhileTheDatabaseIsAway(_ browser: Browser, launch: String) async throws -> Task<Int, any Error> {
        await sandbox.state.setRotateRefreshTokens(true) // the EHR uses up the old refresh token as it answers
        await sandbox.state.resetCounters()
        await sandbox.state.holdTokenAnswers(true)
        let read = Task { try await browser.api(baseURL + "/fhir/Patient/pat-1", launch: launch).status }
        try await untilTheEHRHasARefreshRequest()
        try await PostgresStoreAdmin.takeAway(database.url)
        await sandbox.state.holdTokenAnswers(false)
        return read
    }

    /// Waits until the EHR has a refresh request (counted since its counters were reset), at
    /// most `limit`: a test waiting for one that never comes fails instead of hanging.
    func untilTheEHRHasARefreshRequest(within limit: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + limit
        while await sandbox.state.refreshCount == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        try #require(await sandbox.state.refreshCount > 0, "no refresh request reached the EHR within \(limit)")
    }

    /// The version of a launch's tokens as stored (read with SQL: the pool of a BFF that has
    /// stopped is closed), nil when it has none.
    func tokenVersion(of launch: String) async throws -> Int? {
        try await database.pool.query("SELECT version FROM tokens WHERE launch_hash = \(Identifier.hash(launch))").first?.int(0)
    }
}
