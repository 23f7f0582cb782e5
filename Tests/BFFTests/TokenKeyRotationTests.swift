import Cryptography
import Foundation
import Testing

/// Rotating `BFF_TOKEN_KEY`: with the old key among `BFF_TOKEN_KEY_FALLBACKS`, stored tokens
/// still open and are sealed under the new key at their next write; without it, a session
/// whose tokens no key opens ends cleanly (401, sign in again), never a server error.
@Suite("token key rotation")
struct TokenKeyRotationTests {
    @Test("old key as a fallback: sessions survive the new key, and a refresh re-seals under it; no key that opens: 401, at /session and /context too")
    func rotation() async throws {
        let old = SecureRandom.bytes(32), new = SecureRandom.bytes(32)
        // Instance 0 before the rotation, 1 during it, 2 after the old key was dropped.
        let h = try await BFFHarness.start(instances: 3, proxyCacheSeconds: 0,
                                           tokenKeys: [(key: old, fallbacks: []), (key: new, fallbacks: [old]), (key: new, fallbacks: [])])
        defer { Task { await h.stop() } }
        let login = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(login) // tokens sealed with the old key
        let cookie = try #require(login.cookieValues["bff_session"])
        func read(_ index: Int) async throws -> Int {
            let browser = Browser(client: h.client)
            browser.setCookie("bff_session", cookie)
            return try await browser.api("http://127.0.0.1:\(h.bffs[index].port)/fhir/Patient/pat-1", launch: launch).status
        }
        #expect(try await read(0) == 200)
        #expect(try await read(1) == 200, "the fallback did not open the old key's tokens")

        // A refresh through instance 1 writes the new tokens under the new key.
        await h.sandbox.state.expireAccessTokens()
        #expect(try await read(1) == 200)
        #expect(await h.sandbox.state.refreshCount == 1)
        #expect(try await read(2) == 200, "the refreshed tokens were not sealed with the new key")
        let status = try await read(0)
        #expect(status == 401, "tokens no key opens must end the session, not fail the request (got \(status))")
        let stranger = Browser(client: h.client)
        stranger.setCookie("bff_session", cookie)
        let page = try await stranger.api("http://127.0.0.1:\(h.bffs[0].port)/fhir/Patient/pat-1", launch: launch)
        // Not the EHR's doing: the detail does not blame it.
        #expect(page.text.contains("cannot be read by this server") && !page.text.contains("The EHR"), "\(page.text)")
        #expect(try await read(2) == 200, "the key that opens them still does: nothing was deleted")
        // Where no read can be made, the session does not look alive either.
        for path in ["/session", "/context"] {
            let shown = try await stranger.api("http://127.0.0.1:\(h.bffs[0].port)" + path, launch: launch)
            #expect(shown.status == 401 && shown.text.contains("/problems/session-ended"), "\(path): \(shown.status) \(shown.text)")
            #expect(try await stranger.api("http://127.0.0.1:\(h.bffs[2].port)" + path, launch: launch).status == 200, "\(path)")
        }
    }
}
