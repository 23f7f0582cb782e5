import Foundation
import JSON
import Sandbox
import Testing

@Suite("Sandbox authorization endpoint and EHR launch")
struct AuthorizeTests {
    @Test("EHR launch: launch-ehr sends the app iss and launch; authorize approves at once with code, state and iss")
    func ehrLaunch() async throws {
        try await SandboxHarness.with { h in
            let entry = try await h.get(h.sandbox.ehrLaunchURL(app: "http://app.example/launch?x=1", patient: "pat-2"))
            #expect(entry.status == 302)
            let location = try #require(entry.header("Location"))
            #expect(location.hasPrefix("http://app.example/launch?x=1&"))
            let query = SandboxHarness.query(location)
            #expect(query["iss"] == h.sandbox.fhirBaseURL)
            let launch = try #require(query["launch"])

            let (_, challenge) = SandboxHarness.pkce()
            let response = try await h.get(h.authorizeURL(scope: "launch openid", challenge: challenge, state: "s&t=1", launch: launch))
            #expect(response.status == 302)
            let redirect = try #require(response.header("Location"))
            #expect(redirect.hasPrefix(SandboxHarness.redirectURI + "?"))
            let answer = SandboxHarness.query(redirect)
            #expect(answer["code"]?.isEmpty == false)
            #expect(answer["state"] == "s&t=1")
            #expect(answer["iss"] == h.sandbox.fhirBaseURL)
        }
    }

    @Test("launch-ehr adds iss and launch to the app URL's query, before its fragment")
    func ehrLaunchKeepsFragmentLast() async throws {
        try await SandboxHarness.with { h in
            let entry = try await h.get(h.sandbox.ehrLaunchURL(app: "http://app.example/launch#frag", patient: "pat-2"))
            let location = try #require(entry.header("Location"))
            #expect(location.hasPrefix("http://app.example/launch?") && location.hasSuffix("#frag"), "\(location)")
            #expect(SandboxHarness.query(String(location.prefix { $0 != "#" }))["iss"] == h.sandbox.fhirBaseURL)
        }
    }

    @Test("launch-ehr refuses app URLs that are not http(s), off every registered client's origin (no open redirect), and unknown patients", arguments: [
        "javascript:alert(1)", "data:text/html,hi", "//evil.example/launch", "ftp://app.example/launch", "https:///nohost",
        "http://evil.example/launch", "https://app.example/launch", "http://app.example:8080/launch", "http://app.example.evil/launch",
        "http://user@app.example/launch",
    ])
    func launchEHRRefusesSchemes(app: String) async throws {
        try await SandboxHarness.with { h in
            let response = try await h.get(h.sandbox.ehrLaunchURL(app: app))
            #expect(response.status == 400 && response.header("Location") == nil)
            #expect(try await h.get(h.sandbox.ehrLaunchURL(app: "http://app.example/l", patient: "nobody")).status == 400)
        }
    }

    @Test("Standalone launch: an escaped patient picker whose links carry the request and end in a code")
    func standalonePicker() async throws {
        try await SandboxHarness.with { h in
            let (_, challenge) = SandboxHarness.pkce()
            let url = h.authorizeURL(scope: "launch/patient openid patient/*.rs", challenge: challenge, state: "<b>\"x\"</b>")
            let picker = try await h.get(url)
            #expect(picker.status == 200 && picker.header("Content-Type")?.hasPrefix("text/html") == true)
            let html = String(decoding: picker.body, as: UTF8.self)
            #expect(!html.contains("<b>") && !html.contains("\"x\""))
            let hrefs = html.matches(of: /href="([^"]*)"/).map { String($0.1).replacingOccurrences(of: "&amp;", with: "&") }
            #expect(hrefs.count == 3)
            let chosen = try #require(hrefs.first { SandboxHarness.query("http://x" + $0)["patient"] == "pat-3" })
            #expect(chosen.hasPrefix("/authorize/approve?"))
            let approved = try await h.get(chosen)
            #expect(approved.status == 302)
            let answer = SandboxHarness.query(try #require(approved.header("Location")))
            #expect(answer["code"]?.isEmpty == false && answer["state"] == "<b>\"x\"</b>" && answer["iss"] == h.sandbox.fhirBaseURL)
        }
    }

    @Test("The approve step checks the request again: an unknown patient or a dropped PKCE challenge is refused")
    func approveRechecks() async throws {
        try await SandboxHarness.with { h in
            let (_, challenge) = SandboxHarness.pkce()
            let query = String(h.authorizeURL(scope: "launch/patient openid", challenge: challenge).split(separator: "?", maxSplits: 1)[1])
            #expect(try await h.get("/authorize/approve?" + query + "&patient=nobody").status == 400)
            let withoutPKCE = String(h.authorizeURL(scope: "launch/patient", challenge: nil, method: nil).split(separator: "?", maxSplits: 1)[1])
            let refused = try await h.get("/authorize/approve?" + withoutPKCE + "&patient=pat-1")
            #expect(try SandboxHarness.query(#require(refused.header("Location")))["error"] == "invalid_request")
        }
    }

    @Test("An unknown client or an unregistered redirect_uri is shown to the user, never redirected to")
    func unknownClientOrRedirect() async throws {
        try await SandboxHarness.with { h in
            let (_, challenge) = SandboxHarness.pkce()
            for url in [h.authorizeURL(client: "nobody", challenge: challenge),
                        h.authorizeURL(redirectURI: "http://app.example/cb/extra", challenge: challenge),
                        h.authorizeURL(redirectURI: "http://app.example/c", challenge: challenge),
                        h.authorizeURL(redirectURI: nil, challenge: challenge)] {
                let response = try await h.get(url)
                #expect(response.status == 400 && response.header("Location") == nil, "\(url)")
            }
        }
    }

    @Test("Bad requests go back as error redirects with state and iss", arguments: [
        ("aud", "invalid_request"), ("pkce-missing", "invalid_request"), ("pkce-plain", "invalid_request"),
        ("response_type", "unsupported_response_type"), ("state-missing", "invalid_request"), ("launch-unknown", "invalid_request"),
    ])
    func errorRedirects(problem: String, error: String) async throws {
        try await SandboxHarness.with { h in
            let (_, challenge) = SandboxHarness.pkce()
            let url = switch problem {
            case "aud": h.authorizeURL(challenge: challenge, aud: "https://other.example/fhir")
            case "pkce-missing": h.authorizeURL(challenge: nil, method: nil)
            case "pkce-plain": h.authorizeURL(challenge: challenge, method: "plain")
            case "response_type": h.authorizeURL(challenge: challenge, responseType: "token")
            case "state-missing": h.authorizeURL(challenge: challenge, state: nil)
            default: h.authorizeURL(challenge: challenge, launch: "not-a-launch")
            }
            let response = try await h.get(url)
            #expect(response.status == 302)
            let location = try #require(response.header("Location"))
            #expect(location.hasPrefix(SandboxHarness.redirectURI + "?"))
            let query = SandboxHarness.query(location)
            #expect(query["error"] == error && query["code"] == nil)
            #expect(query["iss"] == h.sandbox.fhirBaseURL)
            if problem != "state-missing" { #expect(query["state"] == "st-1") }
        }
    }

    @Test("aud may carry a trailing slash")
    func audTrailingSlash() async throws {
        try await SandboxHarness.with { h in
            let (_, challenge) = SandboxHarness.pkce()
            let response = try await h.get(h.authorizeURL(scope: "openid", challenge: challenge, aud: h.sandbox.fhirBaseURL + "/"))
            #expect(try SandboxHarness.query(#require(response.header("Location")))["code"] != nil)
        }
    }

    @Test("denyNext answers the next authorization with access_denied, then approves again")
    func denyNext() async throws {
        try await SandboxHarness.with { h in
            await h.sandbox.state.denyNext()
            let (_, challenge) = SandboxHarness.pkce()
            let denied = SandboxHarness.query(try #require(try await h.get(h.authorizeURL(scope: "openid", challenge: challenge)).header("Location")))
            #expect(denied["error"] == "access_denied" && denied["error_description"]?.isEmpty == false && denied["state"] == "st-1")
            #expect(denied["code"] == nil)
            let next = SandboxHarness.query(try #require(try await h.get(h.authorizeURL(scope: "openid", challenge: challenge)).header("Location")))
            #expect(next["code"] != nil && next["error"] == nil)
        }
    }
}
