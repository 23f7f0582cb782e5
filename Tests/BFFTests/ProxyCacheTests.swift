import Foundation
import Sandbox
import Testing

/// The FHIR proxy's short-lived session cache (`BFF_PROXY_CACHE_SECONDS`) must never let a
/// session outlive its end on the instance that ended it, and on other instances only as
/// long as the documented cache time.
@Suite("FHIR proxy session cache")
struct ProxyCacheTests {
    /// Reads `/fhir/Patient/pat-1` through instance `index` with `cookie`.
    private func read(_ h: BFFHarness, _ index: Int, cookie: String, launch: String?) async throws -> Int {
        let browser = Browser(client: h.client)
        browser.setCookie("bff_session", cookie)
        return try await browser.api("http://127.0.0.1:\(h.bffs[index].port)/fhir/Patient/pat-1", launch: launch).status
    }

    /// A harness with a standalone login done through instance 0: its cookie and launch.
    private func loggedIn(instances: Int, proxyCacheSeconds: Int = 2,
                          sandbox: (inout SandboxEHR.Options) -> Void = { _ in }) async throws -> (BFFHarness, Browser, String, String?) {
        let h = try await BFFHarness.start(instances: instances, proxyCacheSeconds: proxyCacheSeconds, sandbox: sandbox)
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        return (h, browser, try #require(browser.cookieValues["bff_session"]), launch)
    }

    /// Seconds until reads through instance `index` are refused, polling; nil if they never
    /// were within `limit` (a no-hang limit: one read is always made after it, so a stall of
    /// this task cannot end the polling without a look).
    private func secondsUntilRefused(_ h: BFFHarness, _ index: Int, cookie: String, launch: String?, limit: Double = 60) async throws -> Double? {
        let start = Date()
        while true {
            let last = Date().timeIntervalSince(start) >= limit
            if try await read(h, index, cookie: cookie, launch: launch) == 401 { return Date().timeIntervalSince(start) }
            if last { return nil }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    @Test("logout: the instance that logged out refuses at once; an EHR that revokes makes the other refuse at once too")
    func logoutWithRevocation() async throws {
        let (h, browser, cookie, launch) = try await loggedIn(instances: 2)
        defer { Task { await h.stop() } }
        #expect(try await read(h, 0, cookie: cookie, launch: launch) == 200) // both instances now hold it
        #expect(try await read(h, 1, cookie: cookie, launch: launch) == 200)
        #expect(try await browser.api("POST", h.baseURL + "/logout").status == 204)
        #expect(try await read(h, 0, cookie: cookie, launch: launch) == 401)
        // Instance 1's cached token was revoked: the EHR's 401 sends it to the database, where the session is gone.
        #expect(try await read(h, 1, cookie: cookie, launch: launch) == 401)
    }

    @Test("logout: a read from another tab while the EHR is still revoking is refused, not served from the cache")
    func readDuringSlowRevocation() async throws {
        let (h, browser, cookie, launch) = try await loggedIn(instances: 1, proxyCacheSeconds: 60)
        defer { Task { await h.stop() } }
        #expect(try await read(h, 0, cookie: cookie, launch: launch) == 200) // cached for 60 s
        await h.sandbox.state.setRevocationDelay(.seconds(10)) // the read below comes long before
        let logout = Task { try await browser.api("POST", h.baseURL + "/logout").status }
        // The rows are gone once the EHR has been asked to revoke (it counts on arrival).
        let deadline = ContinuousClock.now + .seconds(30)
        while await h.sandbox.state.revocations == 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await read(h, 0, cookie: cookie, launch: launch) == 401)
        await h.sandbox.state.setRevocationDelay(nil)
        #expect(try await logout.value == 204)
    }

    @Test("logout with an EHR that does not revoke: the other instance refuses within BFF_PROXY_CACHE_SECONDS, at once with 0")
    func logoutWithoutRevocation() async throws {
        for cacheSeconds in [2, 0] {
            let (h, browser, cookie, launch) = try await loggedIn(instances: 2, proxyCacheSeconds: cacheSeconds) { $0.revocation = false }
            defer { Task { await h.stop() } }
            #expect(try await read(h, 0, cookie: cookie, launch: launch) == 200) // both instances now hold it
            #expect(try await read(h, 1, cookie: cookie, launch: launch) == 200)
            #expect(try await browser.api("POST", h.baseURL + "/logout").status == 204)
            #expect(await h.sandbox.state.revocations == 0)
            #expect(try await read(h, 0, cookie: cookie, launch: launch) == 401)
            if cacheSeconds == 0 {
                // Asked of the first read itself, not of a time this task could be held past.
                #expect(try await read(h, 1, cookie: cookie, launch: launch) == 401, "with the cache off, the first read after logout is refused")
            } else {
                let waited = try await secondsUntilRefused(h, 1, cookie: cookie, launch: launch)
                #expect(waited != nil, "instance 1 still serves a logged-out session")
            }
        }
    }

    @Test("a new login in the same browser: the previous session identifier is refused at once, though it was just used")
    func rotationEndsTheOldIdentifier() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, first) = try await h.standaloneLogin(browser)
        let old = try #require(browser.cookieValues["bff_session"])
        #expect(try await read(h, 0, cookie: old, launch: first) == 200)
        let (_, second) = try await h.standaloneLogin(browser)
        let new = try #require(browser.cookieValues["bff_session"])
        #expect(new != old)
        #expect(try await read(h, 0, cookie: old, launch: first) == 401)
        #expect(try await read(h, 0, cookie: new, launch: first) == 200) // the earlier launch carried over
        #expect(try await read(h, 0, cookie: new, launch: second) == 200)
    }

    @Test("a refresh on one instance: the other's cached access token is replaced after the EHR refuses it, with no second refresh")
    func refreshElsewhere() async throws {
        let (h, _, cookie, launch) = try await loggedIn(instances: 2)
        defer { Task { await h.stop() } }
        #expect(try await read(h, 1, cookie: cookie, launch: launch) == 200) // instance 1 caches the first token
        await h.sandbox.state.expireAccessTokens()
        await h.sandbox.state.resetCounters()
        #expect(try await read(h, 0, cookie: cookie, launch: launch) == 200) // 401 upstream, refresh, retry
        #expect(await h.sandbox.state.refreshCount == 1)
        #expect(try await read(h, 1, cookie: cookie, launch: launch) == 200) // 401 upstream, newer version in the database
        #expect(await h.sandbox.state.refreshCount == 1)
    }
}
