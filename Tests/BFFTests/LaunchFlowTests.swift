import BFF
import BFFTesting
import Foundation
#if canImport(Glibc)
import Glibc
import HTTPCore
#endif
import JSON
import Sandbox
import Synchronization
import Testing

@Suite("SMART launch flows over real sockets")
struct LaunchFlowTests {
    @Test("standalone launch: redirect parameters, session cookie, /session and /context without any token")
    func standalone() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let login = try await browser.request(h.baseURL + "/login")
        #expect(login.status == 302)
        let authorize = try #require(URLComponents(string: login.location ?? ""))
        let q = Dictionary(uniqueKeysWithValues: (authorize.queryItems ?? []).map { ($0.name, $0.value ?? "") })
        #expect(q["response_type"] == "code" && q["client_id"] == "test-app" && q["code_challenge_method"] == "S256")
        #expect(q["aud"] == h.sandbox.fhirBaseURL && q["redirect_uri"] == h.baseURL + "/callback" && q["launch"] == nil)
        #expect((q["state"]?.count ?? 0) >= 43 && (q["nonce"]?.count ?? 0) >= 43 && q["code_challenge"]?.count == 43)

        let (done, launch) = try await h.standaloneLogin(browser)
        #expect(done.status == 302)
        #expect(done.location?.hasPrefix(h.baseURL + "/?bff_launch=") == true)
        let cookie = try #require(done.setCookies.first)
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax") && cookie.contains("Path=/") && !cookie.contains("Domain"))
        let session = try await browser.api(h.baseURL + "/session", launch: launch)
        #expect(session.status == 200)
        let json = try JSONParser.parse(session.body)
        #expect(json["patient"]?.stringValue == "pat-1" && json["sub"]?.stringValue == "user-prac-1")
        #expect(json["fhirUser"]?.stringValue?.hasSuffix("Practitioner/prac-1") == true)
        let context = try JSONParser.parse(try await browser.api(h.baseURL + "/context", launch: launch).body)
        #expect(context["patient"]?.stringValue == "pat-1" && context["need_patient_banner"]?.boolValue == true)
        for page in [session.text, String(decoding: context.bytes, as: UTF8.self), done.headers.map { "\($0.name): \($0.value)" }.joined()] {
            #expect(!page.contains("access_token") && !page.contains("refresh_token") && !page.contains("id_token"))
        }
    }

    /// A front end that passes its own URL as return_to, still holding the last sign-in's
    /// bff_launch: it gets one bff_launch back, this sign-in's, whichever value it reads.
    @Test("a return_to holding an earlier bff_launch gets this sign-in's in its place")
    func returnToWithAnEarlierLaunch() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let (done, launch) = try await h.standaloneLogin(Browser(client: h.client), returnTo: "/app?bff_launch=earlier&tab=2#chart")
        let location = try #require(done.location)
        #expect(location == h.baseURL + "/app?tab=2&bff_launch=\(try #require(launch))#chart", "\(location)")
    }

    @Test("EHR launch: launch echoed with the launch scope; encounter in context")
    func ehrLaunch() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let entry = try await browser.request(h.sandbox.ehrLaunchURL(app: h.baseURL + "/launch", patient: "pat-2"))
        let launchPage = try await browser.request(try #require(entry.location))
        let authorize = try #require(URLComponents(string: launchPage.location ?? ""))
        let q = Dictionary(uniqueKeysWithValues: (authorize.queryItems ?? []).map { ($0.name, $0.value ?? "") })
        #expect(q["launch"] != nil && q["scope"]?.split(separator: " ").contains("launch") == true)
        let approved = try await browser.request(authorize.string!)
        let (_, launch) = try await h.finishCallback(browser, try #require(approved.location))
        let context = try JSONParser.parse(try await browser.api(h.baseURL + "/context", launch: launch).body)
        #expect(context["patient"]?.stringValue == "pat-2" && context["encounter"]?.stringValue == "enc-2")
    }

    @Test("an unregistered iss is refused before any network call")
    func unknownIssuer() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let page = try await browser.request(h.baseURL + "/launch?iss=http%3A%2F%2F127.0.0.1%3A1%2Ffhir&launch=x")
        #expect(page.status == 400)
        #expect(page.header("Content-Type") == "application/problem+json")
        #expect(try await browser.request(h.baseURL + "/launch?launch=x").status == 400)
        #expect(try await browser.request(h.baseURL + "/launch?iss=" + h.sandbox.fhirBaseURL).status == 400)
    }

    @Test("control characters in launch or state are 400, never a 500 from the database", arguments: ["%00", "%0D%0A", "%7F", "%1B"])
    func controlCharacters(_ encoded: String) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let iss = h.sandbox.fhirBaseURL.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let launch = try await browser.request(h.baseURL + "/launch?iss=" + iss + "&launch=a" + encoded + "b")
        #expect(launch.status == 400)
        #expect(launch.header("Content-Type") == "application/problem+json")
        let callback = try await browser.request(h.baseURL + "/callback?code=c&state=a" + encoded + "b")
        #expect(callback.status == 400)
    }

    @Test("reused and forged state: 400, no session, and no token request", arguments: ["reused", "forged", "missing"])
    func badState(_ kind: String) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let callback = try #require(try await h.approvedCallback(browser))
        let binding = browser.cookieValues.filter { $0.key.hasPrefix("bff_login_") }
        #expect(binding.count == 1, "the sign-in is bound to its browser")
        if kind == "reused" { _ = try await browser.request(callback) }
        browser.clearCookies()
        for (name, value) in binding { browser.setCookie(name, value) } // only the state itself can stop these
        await h.sandbox.state.resetCounters()
        let target: String
        switch kind {
        case "forged": target = callback.replacingOccurrences(of: "state=", with: "state=forged")
        case "missing": target = h.baseURL + "/callback?code=abc"
        default: target = callback
        }
        let page = try await browser.request(target)
        #expect(page.status == 400)
        #expect(page.setCookies.isEmpty)
        #expect(await h.sandbox.state.tokenRequests == 0)
    }

    @Test("login CSRF: a callback opened in another browser than the one that signed in is 400, asks the EHR nothing, and leaves that browser's session as it was")
    func callbackInAnotherBrowser() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let attacker = Browser(client: h.client)
        let callback = try #require(try await h.approvedCallback(attacker)) // the attacker's own code and state
        let victim = Browser(client: h.client)
        _ = try await h.standaloneLogin(victim, patient: "pat-2")
        await h.sandbox.state.resetCounters()
        let forced = try await victim.request(callback)
        #expect(forced.status == 400 && forced.setCookies.isEmpty)
        #expect(await h.sandbox.state.tokenRequests == 0)
        let context = try await victim.api(h.baseURL + "/context") // the most recent launch
        #expect(context.status == 200 && context.text.contains("pat-2"), "\(context.text)")
        #expect(try await attacker.request(callback).status == 302, "the sign-in still completes where it began")
    }

    @Test("an EHR whose discovery never answers: 502 'discovery failed' at login, once the read timeout has passed")
    func discoveryTimeout() async throws {
        let (silent, port) = try LoopbackSocket.listen(backlog: 8) // connections wait in its backlog, unanswered
        defer { Glibc.close(silent) }
        let silentISS = "http://127.0.0.1:\(port)/fhir"
        let h = try await BFFHarness.start(registrations: { s, _ in
            [IssuerRegistration(iss: s.fhirBaseURL, clientID: "test-app"), IssuerRegistration(iss: silentISS, clientID: "test-app")]
        }, readTimeout: .seconds(1))
        defer { Task { await h.stop() } }
        let login = try await Browser(client: h.client).request(h.baseURL + "/login?iss=" + silentISS.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        #expect(login.status == 502 && login.text.contains("EHR discovery failed"), "\(login.status) \(login.text)")
    }

    @Test("a smart-configuration over 1 MiB fails discovery (502 at login), and /readyz says it was too large")
    func bloatedDiscovery() async throws {
        let h = try await BFFHarness.start(sandbox: { $0.smartConfigurationMembers = ["padding": String(repeating: "x", count: 2 << 20)] })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let login = try await browser.request(h.baseURL + "/login")
        #expect(login.status == 502 && login.text.contains("EHR discovery failed"), "\(login.status) \(login.text)")
        let ready = try await browser.request(h.baseURL + "/readyz").text
        #expect(ready.contains("smart-configuration answered with more than 1 MiB"), "\(ready)")
    }

    @Test("a parameter given twice (RFC 6749 §3.1) at /launch, /login or /callback is 400; at /callback the state is not used up", arguments: [
        "code", "state", "iss", "error",
    ])
    func repeatedParameters(_ name: String) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let iss = h.sandbox.fhirBaseURL.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        for path in ["/launch?iss=\(iss)&launch=a&launch=b", "/launch?iss=\(iss)&iss=\(iss)&launch=a", "/login?iss=\(iss)&iss=\(iss)",
                     "/login?return_to=/a&return_to=/b"] {
            let page = try await browser.request(h.baseURL + path)
            #expect(page.status == 400 && page.text.contains("more than once"), "\(path): \(page.status)")
        }
        let callback = try #require(try await h.approvedCallback(browser))
        await h.sandbox.state.resetCounters()
        let present = URLComponents(string: callback)?.queryItems?.contains { $0.name == name } ?? false
        let doubled = try await browser.request(callback + "&\(name)=x" + (present ? "" : "&\(name)=y"))
        #expect(doubled.status == 400 && doubled.text.contains("more than once") && doubled.setCookies.isEmpty, "\(doubled.status) \(doubled.text)")
        #expect(await h.sandbox.state.tokenRequests == 0)
        let done = try await h.finishCallback(browser, callback)
        #expect(done.page.status == 302 && done.launch != nil, "the sign-in goes on: \(done.page.status)")
    }

    @Test("RFC 9207: an iss from another authorization server is refused (mix-up)")
    func mixUp() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let callback = try #require(try await h.approvedCallback(browser))
        var c = URLComponents(string: callback)!
        c.queryItems = c.queryItems!.map { $0.name == "iss" ? URLQueryItem(name: "iss", value: "https://attacker.example/fhir") : $0 }
        await h.sandbox.state.resetCounters()
        let page = try await browser.request(c.string!)
        #expect(page.status == 400 && page.setCookies.isEmpty)
        #expect(await h.sandbox.state.tokenRequests == 0)
        var stripped = URLComponents(string: callback)!
        stripped.queryItems = stripped.queryItems!.filter { $0.name != "iss" }
        #expect(try await browser.request(stripped.string!).status == 400) // state already used, and iss is required
    }

    @Test("an EHR whose ID tokens name another issuer than its discovery does (Oracle Health's tenants), RFC 9207's iss its discovery's: sign-in works once id_token_issuer names the tokens' issuer, trailing slash and all")
    func idTokensOfAnotherIssuer() async throws {
        let tokensIssuer = "https://authorization.example.org/tenants/t-1/oidc/idsps/t-1/"
        let h = try await BFFHarness.start(registrations: { sandbox, _ in
            var registration = IssuerRegistration(iss: sandbox.fhirBaseURL, clientID: "test-app")
            registration.idTokenIssuer = tokensIssuer
            return [registration]
        }, sandbox: { $0.idTokensOwnIssuer = tokensIssuer; $0.issParameter = true })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (done, launch) = try await h.standaloneLogin(browser)
        #expect(done.status == 302 && launch != nil, "\(done.status) \(done.text)")
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 200)
    }

    @Test("an EHR whose discovery names no JWKS and whose OpenID configuration is only under its OAuth server (Epic before August 2021): sign-in works once id_token_issuer names that server; without it, 401")
    func jwksFromTheIssuersOwnDiscovery() async throws {
        func start(naming: Bool) async throws -> BFFHarness {
            try await BFFHarness.start(registrations: { sandbox, _ in
                var registration = IssuerRegistration(iss: sandbox.fhirBaseURL, clientID: "test-app")
                if naming { registration.idTokenIssuer = sandbox.baseURL + "/oauth2" }
                return [registration]
            }, sandbox: { $0.openIDConfigurationAtOAuthServerOnly = true; $0.issParameter = naming }) // else RFC 9207's iss fails first
        }
        let named = try await start(naming: true)
        defer { Task { await named.stop() } }
        let browser = Browser(client: named.client)
        let (done, launch) = try await named.standaloneLogin(browser)
        #expect(done.status == 302 && launch != nil, "\(done.status) \(done.text)")
        #expect(try await browser.api(named.baseURL + "/session", launch: launch).status == 200)
        let unnamed = try await start(naming: false)
        defer { Task { await unnamed.stop() } }
        let refused = try await unnamed.standaloneLogin(Browser(client: unnamed.client))
        #expect(refused.page.status == 401 && refused.page.text.contains("publishes no JWKS"), "\(refused.page.status) \(refused.page.text)")
    }

    @Test("an EHR whose discovery names no OpenID issuer and whose ID tokens name another (as an Oracle Health tenant was reported to): sign-in is 401 with the token's iss in the log line, and works once the registration's id_token_issuer names it, RFC 9207 iss included")
    func idTokenIssuerFromTheRegistration() async throws {
        let authorizationServer = "https://authorization.example.org/tenants/t-1/"
        func start(naming issuer: String?, issParameter: Bool) async throws -> BFFHarness {
            try await BFFHarness.start(registrations: { sandbox, _ in
                var registration = IssuerRegistration(iss: sandbox.fhirBaseURL, clientID: "test-app")
                registration.idTokenIssuer = issuer
                return [registration]
            }, sandbox: { $0.idTokenIssuer = authorizationServer; $0.issParameter = issParameter })
        }
        // Without it (and without RFC 9207's iss, which would fail first): the FHIR base is expected.
        let unnamed = try await start(naming: nil, issParameter: false)
        defer { Task { await unnamed.stop() } }
        let refused = try await unnamed.standaloneLogin(Browser(client: unnamed.client))
        #expect(refused.page.status == 401 && refused.launch == nil, "\(refused.page.status) \(refused.page.text)")
        // The tokens the refused sign-in was given go back to the EHR: no launch holds them.
        #expect(await unnamed.sandbox.state.liveRefreshTokens == 0)
        #expect(await unnamed.sandbox.state.liveAccessTokens == 0)
        let line = unnamed.logs.captured.first { $0.contains("ID token rejected") } ?? ""
        #expect(line.contains("tenants") && line.contains(unnamed.sandbox.fhirBaseURL.split(separator: ":").last!), "the log names the issuer sent and the one expected: \(line)")

        let named = try await start(naming: authorizationServer, issParameter: true)
        defer { Task { await named.stop() } }
        let browser = Browser(client: named.client)
        let (_, launch) = try await named.standaloneLogin(browser)
        #expect(launch != nil)
        #expect(try await browser.api(named.baseURL + "/session", launch: launch).status == 200)
    }

    @Test("need_patient_banner written as a string, as Epic does, reaches /context as the boolean it says; one that says neither is null",
          arguments: [(JSONValue.string("false"), false as Bool?), (.string("true"), true), (.string("no"), nil), (.number(0), nil)])
    func needPatientBannerAsString(given: JSONValue, shown: Bool?) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        await h.sandbox.state.setTokenResponseExtras(["need_patient_banner": given])
        let (_, launch) = try await h.standaloneLogin(browser)
        let context = try JSONParser.parse(try await browser.api(h.baseURL + "/context", launch: launch).body)
        #expect(context["need_patient_banner"]?.boolValue == shown, "\(String(decoding: context.bytes, as: UTF8.self))")
        #expect(context["patient"]?.stringValue == "pat-1")
    }

    @Test("openid asked for (a nonce sent), but the token response narrows scope to leave it out and has no ID token: 401 id-token-rejected, no session")
    func idTokenRequiredWhenAskedFor() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        await h.sandbox.state.setTokenResponseExtras(["scope": "launch/patient fhirUser patient/*.rs offline_access", "id_token": nil])
        let (page, launch) = try await h.standaloneLogin(browser)
        #expect(page.status == 401 && launch == nil, "\(page.status) \(page.text)")
        #expect((try? JSONParser.parse(page.body))?["type"]?.stringValue?.hasSuffix("/id-token-rejected") == true, "\(page.text)")
        #expect(!page.setCookies.contains { $0.hasPrefix("bff_session=") }, "no session cookie on a failure: \(page.setCookies)")
        #expect(browser.cookieValues["bff_session"] == nil)
        #expect(try await browser.api(h.baseURL + "/session").status == 401)
    }

    @Test("expires_in 0 signs in with the token's life unknown (no refresh until the EHR refuses it); 1e13 s, a date PostgreSQL cannot store, signs in, held valid for a year",
          arguments: [0.0, 1e13])
    func expiresInBounds(expiresIn: Double) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        await h.sandbox.state.setTokenResponseExtras(["expires_in": .number(expiresIn)])
        let (done, launch) = try await h.standaloneLogin(browser)
        #expect(done.status == 302 && launch != nil, "\(done.status) \(done.text)")
        await h.sandbox.state.resetCounters()
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 200)
        for _ in 0..<3 { #expect(try await browser.api(h.baseURL + "/fhir/Patient/pat-1", launch: launch).status == 200) }
        #expect(await h.sandbox.state.refreshCount == 0)
    }

    @Test("the EHR's error becomes 403 with its description")
    func ehrError() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        await h.sandbox.state.denyNext()
        let login = try await browser.request(h.baseURL + "/login")
        let denied = try await browser.request(login.location!)
        let page = try await browser.request(try #require(denied.location))
        #expect(page.status == 403)
        #expect(page.text.contains("access_denied") && page.setCookies.isEmpty)
    }

    @Test("open redirects are refused", arguments: [
        "https://evil.example/", "//evil.example/x", "/\\evil.example", "https://127.0.0.1.evil.example/", "javascript:alert(1)",
        "http://127.0.0.1:1@evil.example/", "evilapp://cb", "http://evil.example%2F@127.0.0.1/",
    ])
    func openRedirect(_ target: String) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let page = try await Browser(client: h.client).request(h.baseURL + "/login?return_to=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        #expect(page.status == 400)
        #expect(page.location == nil)
    }

    @Test("CSRF: cookie requests without X-CSRF: 1 are 403; no session is 401")
    func csrf() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser)
        for path in ["/session", "/context", "/fhir/Patient/pat-1"] {
            #expect(try await browser.api(h.baseURL + path, launch: launch, csrf: false).status == 403)
            #expect(try await browser.api(h.baseURL + path, launch: launch, csrf: false, headers: [("X-CSRF", "0")]).status == 403)
        }
        #expect(try await browser.api("POST", h.baseURL + "/logout", launch: launch, csrf: false).status == 403)
        #expect(try await Browser(client: h.client).api(h.baseURL + "/session").status == 401)
        // A page of another origin cannot send X-CSRF: its fetch is preflighted, and the
        // preflight allows nothing (no CORS), so the browser never sends the request.
        for path in ["/session", "/context", "/fhir/Patient/pat-1", "/logout"] {
            let preflight = try await browser.request("OPTIONS", h.baseURL + path, headers: [
                ("Origin", "https://evil.example"), ("Access-Control-Request-Method", path == "/logout" ? "POST" : "GET"),
                ("Access-Control-Request-Headers", "x-csrf, x-bff-launch"),
            ])
            #expect(!(200...299).contains(preflight.status), "\(path): \(preflight.status)")
            #expect(!preflight.headers.contains { $0.name.lowercased().hasPrefix("access-control-") }, "\(path): \(preflight.headers)")
        }
    }

    @Test("two launches in one browser never see each other's context; the cookie is renewed at each login")
    func twoLaunches() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, first) = try await h.standaloneLogin(browser, patient: "pat-1")
        let firstCookie = browser.cookieValues["bff_session"]
        let (_, second) = try await h.ehrLaunch(browser, patient: "pat-3")
        #expect(browser.cookieValues["bff_session"] != firstCookie)
        let a = try JSONParser.parse(try await browser.api(h.baseURL + "/context", launch: first).body)
        let b = try JSONParser.parse(try await browser.api(h.baseURL + "/context", launch: second).body)
        #expect(a["patient"]?.stringValue == "pat-1" && b["patient"]?.stringValue == "pat-3")
        let latest = try JSONParser.parse(try await browser.api(h.baseURL + "/context").body)
        #expect(latest["patient"]?.stringValue == "pat-3")
        #expect(try await browser.api(h.baseURL + "/context", launch: "not-a-launch").status == 401)
        // The old cookie no longer works (no fixation).
        let stale = Browser(client: h.client)
        stale.setCookie("bff_session", firstCookie!)
        #expect(try await stale.api(h.baseURL + "/session").status == 401)
    }

    @Test("logout of one launch, then of the session, revokes tokens at the EHR and expires the cookie")
    func logout() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, first) = try await h.standaloneLogin(browser, patient: "pat-1")
        let (_, second) = try await h.standaloneLogin(browser, patient: "pat-2")
        await h.sandbox.state.resetCounters()
        #expect(try await browser.api("POST", h.baseURL + "/logout", launch: first).status == 204)
        #expect(await h.sandbox.state.revocations == 2)
        #expect(try await browser.api(h.baseURL + "/context", launch: first).status == 401)
        #expect(try await browser.api(h.baseURL + "/context", launch: second).status == 200)
        // Again from the first launch's tab: nothing left to end, and the other tab stays signed in.
        let again = try await browser.api("POST", h.baseURL + "/logout", launch: first)
        #expect(again.status == 204 && again.setCookies.isEmpty, "\(again.setCookies)")
        #expect(try await browser.api(h.baseURL + "/context", launch: second).status == 200)
        let out = try await browser.api("POST", h.baseURL + "/logout")
        #expect(out.status == 204 && out.setCookies.first?.contains("Max-Age=0") == true)
        #expect(await h.sandbox.state.revocations == 4)
        #expect(try await browser.api(h.baseURL + "/session").status == 401)
        #expect(try await browser.api("POST", h.baseURL + "/logout").status == 204)
    }
}

extension LaunchFlowTests {
    @Test("a token response that names no scope granted the one asked for (RFC 6749 §5.1): /session says so, and reads within it go upstream")
    func noScopeInAnswer() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        await h.sandbox.state.setTokenResponseExtras(["scope": .null])
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.standaloneLogin(browser).launch)
        let session = try JSONParser.parse(try await browser.api(h.baseURL + "/session", launch: launch).body)
        #expect(session["scope"]?.stringValue == IssuerRegistration(iss: "x", clientID: "x").standaloneScope)
        #expect(try await browser.api(h.baseURL + "/fhir/Observation?patient=pat-1", launch: launch).status == 200)
    }

    @Test("logging out the session's last launch (X-BFF-Launch) ends the session: tokens revoked, row gone; the cookie is left to another tab's sign-in")
    func logoutLastLaunch() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let launch = try #require(try await h.standaloneLogin(browser).launch)
        await h.sandbox.state.resetCounters()
        let out = try await browser.api("POST", h.baseURL + "/logout", launch: launch)
        #expect(out.status == 204 && out.setCookies.isEmpty, "\(out.setCookies)")
        #expect(await h.sandbox.state.revocations == 2)
        #expect(try await h.database.pool.query("SELECT 1 FROM sessions").isEmpty, "an empty session row stays until its TTL")
    }

    @Test("/session reports the expiry the request itself gave the session, not the one before it")
    func sessionExpiryReported() async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        _ = try await h.standaloneLogin(browser)
        // The user was last seen 7 hours ago: one hour of the 8 was left before this request.
        try await h.database.pool.query("UPDATE sessions SET last_seen_at = now() - interval '7 hours', expires_at = now() + interval '1 hour'")
        let session = try await browser.api(h.baseURL + "/session")
        let reported = try #require(JSONParser.parse(session.body)["expires_at"]?.stringValue)
        let stored = try await h.database.pool.query("SELECT extract(epoch from expires_at) FROM sessions")
        let expected = try stored[0].date(0)
        #expect(expected.timeIntervalSinceNow > 7 * 3600, "the request slid the expiry")
        let date = try #require(ISO8601DateFormatter().date(from: reported), "\(reported)")
        #expect(abs(date.timeIntervalSince(expected)) < 2, "reported \(reported), stored \(expected)")
    }

    @Test("an EHR whose smart-configuration fails (503, or 429 from a busy gateway) fails discovery, 502, without falling back to the CapabilityStatement; failures are answered from memory for 5 s, then discovery is tried again",
          arguments: [503, 429])
    func discoveryServerError(status: Int) async throws {
        let failing = Counter(), asked = Counter()
        let front = try RiggedEHRFront(path: "/fhir/.well-known/smart-configuration") { _ in
            asked.increment()
            return failing.current == 0 ? Array("HTTP/1.1 \(status) Busy\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8) : []
        }
        defer { front.shutdown() }
        let h = try await BFFHarness.start(sandbox: { $0.publicBaseURL = front.url })
        defer { Task { await h.stop() } }
        front.forward(to: h.sandbox.port)
        let browser = Browser(client: h.client)
        for _ in 0..<3 {
            let login = try await browser.request(h.baseURL + "/login")
            #expect(login.status == 502 && login.text.contains("HTTP \(status)"), "\(login.status) \(login.text)")
        }
        #expect(asked.current == 1, "one discovery for three sign-in attempts within 5 s")
        let warnings = h.logs.captured.filter { $0.contains("EHR discovery failed") }
        #expect(warnings.count == 3 && warnings.allSatisfy { $0.contains("HTTP \(status)") && $0.contains("bff.request.id") }, "\(warnings)")
        let ready = try await browser.request(h.baseURL + "/readyz").text
        #expect(ready.contains("smart-configuration answered HTTP \(status)"), "\(ready)")
        failing.increment() // the front now closes without an answer for that path...
        try await Task.sleep(for: .milliseconds(5200))
        let retried = try await browser.request(h.baseURL + "/login")
        #expect(retried.status == 502 && asked.current == 2, "tried again after 5 s: \(retried.status) \(asked.current)")
    }
}

extension LaunchFlowTests {
    /// What EHR B's discovery claims of EHR A's (the sandbox's).
    enum Claim: Sendable, CaseIterable {
        /// A's FHIR base, A's issuer by registration.
        case base
        /// The same, B's registration naming an `id_token_issuer` of its own (which its ID
        /// tokens are checked against; the authorization responses' `iss` is still discovery's).
        case baseWithOwnIDTokenIssuer
        /// A's issuer as A's discovery alone names it (Epic's `…/oauth2`), before anyone
        /// signed in at A: only A's discovery, asked now, says whose it is.
        case issuerNotYetDiscovered
    }

    @Test("a registered EHR whose discovery names another registered EHR's issuer: its sign-ins are refused (502), the other's go on (RFC 9207's mix-up defence)",
          arguments: Claim.allCases)
    func discoveryClaimsAnotherIssuer(claim: Claim) async throws {
        let claimed = Mutex<String>("")
        // EHR B: its discovery says it is EHR A (the sandbox), with B's own endpoints, so that
        // A's codes and PKCE verifiers would be sent to B's token endpoint.
        let front = try RiggedEHRFront(path: "/fhir/.well-known/smart-configuration") { _, head in
            LaunchFlowTests.discoveryAnswer(to: head, issuer: { _ in claimed.withLock { $0 } })
        }
        defer { front.shutdown() }
        let h = try await BFFHarness.start(registrations: { s, _ in
            var impostor = IssuerRegistration(iss: front.url + "/fhir", clientID: "test-app")
            if claim == .baseWithOwnIDTokenIssuer { impostor.idTokenIssuer = "https://b.example.org/idp" }
            return [IssuerRegistration(iss: s.fhirBaseURL, clientID: "test-app"), impostor]
        }, sandbox: { $0.issuerAtOAuthServer = claim == .issuerNotYetDiscovered })
        defer { Task { await h.stop() } }
        front.forward(to: h.sandbox.port)
        claimed.withLock { $0 = claim == .issuerNotYetDiscovered ? h.sandbox.issuer : h.sandbox.fhirBaseURL }
        let browser = Browser(client: h.client)
        let impostor = try await browser.request(h.baseURL + "/login?iss=" + PercentEncoding.encode(front.url + "/fhir"))
        #expect(impostor.status == 502 && impostor.text.contains("issuer of another registered EHR"), "\(impostor.status) \(impostor.text)")
        #expect(impostor.location == nil)
        // The EHR whose issuer it is signs in as before, B's claim cached or not.
        let honest = try await browser.request(h.baseURL + "/login?iss=" + PercentEncoding.encode(h.sandbox.fhirBaseURL))
        #expect(honest.status == 302 && honest.location?.hasPrefix(h.sandbox.baseURL) == true, "\(honest.status) \(honest.location ?? "")")
    }
}

extension LaunchFlowTests {
    @Test("two registered EHRs on one origin (two tenants of a host): one whose discovery claims the other's issuer on that origin is refused (502)")
    func discoveryClaimsAnIssuerOnASharedOrigin() async throws {
        // One front for both: A's discovery is rigged; the rest (B, at /fhir) is the sandbox,
        // which takes the front's URL as its own, its issuer the front's /oauth2.
        let front = try RiggedEHRFront(path: "/a/.well-known/smart-configuration") { _, head in
            LaunchFlowTests.discoveryAnswer(to: head, issuer: { host in "http://\(host)/oauth2" }, endpointsUnder: "/a")
        }
        defer { front.shutdown() }
        let h = try await BFFHarness.start(registrations: { s, _ in
            [IssuerRegistration(iss: s.fhirBaseURL, clientID: "test-app"), IssuerRegistration(iss: front.url + "/a", clientID: "test-app")]
        }, sandbox: { $0.publicBaseURL = front.url; $0.issuerAtOAuthServer = true })
        defer { Task { await h.stop() } }
        front.forward(to: h.sandbox.port)
        #expect(h.sandbox.issuer == front.url + "/oauth2")
        let impostor = try await Browser(client: h.client).request(h.baseURL + "/login?iss=" + PercentEncoding.encode(front.url + "/a"))
        #expect(impostor.status == 502 && impostor.text.contains("issuer of another registered EHR"), "\(impostor.status) \(impostor.text)")
        #expect(impostor.location == nil)
    }
}

extension LaunchFlowTests {
    @Test("logout of a session that expired while its tab sat idle still deletes it and revokes its tokens at the EHR",
          arguments: [false, true])
    func logoutAfterExpiry(namingLaunch: Bool) async throws {
        let h = try await BFFHarness.start()
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser, patient: "pat-1")
        try await h.database.pool.query("UPDATE sessions SET expires_at = now() - interval '1 minute'")
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 401)
        await h.sandbox.state.resetCounters()
        let out = try await browser.api("POST", h.baseURL + "/logout", launch: namingLaunch ? launch : nil)
        #expect(out.status == 204 && out.setCookies.first?.contains("Max-Age=0") == true, "\(out.status) \(out.setCookies)")
        #expect(await h.sandbox.state.revocations == 2, "the refresh and the access token")
        #expect(try await h.database.pool.query("SELECT count(*) FROM launches")[0].int(0) == 0)
    }
}

extension LaunchFlowTests {
    @Test("a session that expires unused is swept with its tokens revoked at the EHR; a live session beside it stays")
    func expiredSessionSwept() async throws {
        let h = try await BFFHarness.start(sweepInterval: .milliseconds(200))
        defer { Task { await h.stop() } }
        let idle = Browser(client: h.client), busy = Browser(client: h.client)
        let (_, idleLaunch) = try await h.standaloneLogin(idle, patient: "pat-1")
        let (_, busyLaunch) = try await h.standaloneLogin(busy, patient: "pat-2")
        let idleHash = try #require(try await h.database.pool.query("SELECT session_hash FROM launches WHERE patient = 'pat-1'").first?.string(0))
        await h.sandbox.state.resetCounters()
        try await h.database.pool.query("UPDATE sessions SET expires_at = now() - interval '1 minute' WHERE id_hash = \(idleHash)")
        let deadline = ContinuousClock.now + .seconds(30) // a no-hang limit for a loaded machine
        while try await h.database.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(idleHash)").count > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        while await h.sandbox.state.revocations < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try await h.database.pool.query("SELECT 1 FROM sessions WHERE id_hash = \(idleHash)").isEmpty)
        #expect(await h.sandbox.state.revocations == 2, "the idle session's refresh and access token")
        #expect(try await idle.api(h.baseURL + "/session", launch: idleLaunch).status == 401)
        #expect(try await busy.api(h.baseURL + "/session", launch: busyLaunch).status == 200)
    }
}

extension LaunchFlowTests {
    /// A rigged EHR's smart-configuration, answering the request whose head is `head`: it names
    /// `issuer(host)` as its issuer, and its own `{host}{prefix}/authorize` and `/token` as
    /// endpoints (`host` as the request's `Host` field gives it), so that whatever they are
    /// given reaches the rigged EHR.
    static func discoveryAnswer(to head: String, issuer: (_ host: String) -> String, endpointsUnder prefix: String = "") -> [UInt8] {
        let host = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("host:") }.map { $0.dropFirst(5).trimmingCharacters(in: .whitespaces) } ?? ""
        let body = #"{"issuer":"\#(issuer(host))","authorization_endpoint":"http://\#(host)\#(prefix)/authorize","#
            + #""token_endpoint":"http://\#(host)\#(prefix)/token","code_challenge_methods_supported":["S256"],"capabilities":["launch-standalone"]}"#
        return Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
    }
}

extension LaunchFlowTests {
    @Test("a revocation endpoint off the token endpoint's origin is sent no token and no client credentials; the logout still ends the session")
    func revocationEndpointOffTheTokenEndpointsOrigin() async throws {
        let received = Counter()
        var router = Router()
        router.post("/revoke") { _ in received.increment(); return .text("") }
        let elsewhere = try TestHTTPServer.start(router: router)
        let h = try await BFFHarness.start(sandbox: {
            $0.smartConfigurationMembers = ["revocation_endpoint": "http://127.0.0.1:\(elsewhere.port)/revoke"]
        })
        defer { Task { await h.stop(); await elsewhere.shutdown(gracePeriod: .zero) } }
        let browser = Browser(client: h.client)
        let (_, launch) = try await h.standaloneLogin(browser, patient: "pat-1")
        #expect(try await browser.api("POST", h.baseURL + "/logout", launch: launch).status == 204)
        #expect(try await browser.api(h.baseURL + "/session", launch: launch).status == 401)
        #expect(received.current == 0, "the refresh and access tokens went to another origin")
        #expect(await h.sandbox.state.revocations == 0)
    }
}

extension LaunchFlowTests {
    @Test("a token endpoint that cannot be reached: 502 at the callback, no session, and the browser is not told how the connection failed")
    func tokenEndpointUnreachable() async throws {
        let closed = try LoopbackSocket.bind(port: 0) // bound, never listening: connections are refused
        defer { close(closed.fd) }
        let h = try await BFFHarness.start(sandbox: { $0.smartConfigurationMembers = ["token_endpoint": "http://127.0.0.1:\(closed.port)/token"] })
        defer { Task { await h.stop() } }
        let browser = Browser(client: h.client)
        let (page, launch) = try await h.standaloneLogin(browser, patient: "pat-1")
        #expect(page.status == 502 && launch == nil && page.setCookies.allSatisfy { !$0.hasPrefix("bff_session=") || $0.contains("Max-Age=0") })
        #expect(page.text.contains("the token endpoint could not be reached"), "\(page.text)")
        #expect(!page.text.contains("connect") && !page.text.contains("refused"), "\(page.text)")
    }
}

extension LaunchFlowTests {
    @Test("a token answer over 1 MiB (a bloated launch context) is refused at the callback, 502 and no session, not stored with the launch")
    func bloatedTokenAnswer() async throws {
        let context = String(repeating: "x", count: 2 << 20)
        let answer = Array(#"{"access_token":"a","token_type":"Bearer","expires_in":3600,"scope":"openid patient/*.rs","patient":"pat-1","#.utf8)
            + Array(#""fhirContext":[{"reference":"\#(context)"}]}"#.utf8)
        var router = Router()
        router.post("/token") { _ in .json(answer) }
        let tokenServer = try TestHTTPServer.start(router: router)
        let h = try await BFFHarness.start(sandbox: { $0.smartConfigurationMembers = ["token_endpoint": "http://127.0.0.1:\(tokenServer.port)/token"] })
        defer { Task { await h.stop(); await tokenServer.shutdown(gracePeriod: .zero) } }
        let browser = Browser(client: h.client)
        let (page, launch) = try await h.standaloneLogin(browser, patient: "pat-1")
        #expect(page.status == 502 && launch == nil, "\(page.status)")
        #expect(page.text.contains("larger than 1 MiB"), "\(page.text.prefix(300))")
        #expect(try await h.database.pool.query("SELECT count(*) FROM launches")[0].int(0) == 0)
    }
}
