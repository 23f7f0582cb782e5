import BFF
import Foundation
import JSON
import Testing

@Suite("a sign-in in a browser that already has a session")
struct SignInSessionTests {
    @Test("a sign-in the database refuses (a NUL in the EHR's launch context) leaves the browser's session, cookie and launch working")
    func failedSignInKeepsSession() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, first) = try await h.standaloneLogin(browser, patient: "pat-1")
        let cookie = try #require(browser.cookieValues["bff_session"])
        await h.sandbox.state.setTokenResponseExtras(["intent": "a\u{0}b"]) // PostgreSQL's jsonb refuses \u0000
        let (failed, second) = try await h.standaloneLogin(browser, patient: "pat-2")
        #expect(failed.status == 500 && second == nil, "\(failed.status) \(failed.text)")
        #expect(failed.header("Content-Type") == "application/problem+json")
        #expect(!failed.setCookies.contains { $0.hasPrefix("bff_session=") }, "no session cookie on a failure: \(failed.setCookies)")
        #expect(browser.cookieValues["bff_session"] == cookie)
        let session = try await browser.api(h.baseURL + "/session", launch: first)
        #expect(session.status == 200 && (try? JSONParser.parse(session.body))?["patient"]?.stringValue == "pat-1", "\(session.status) \(session.text)")
        #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: first).status == 200, "the launch's tokens are still its own")
    }
}
