import Foundation
import HTTPCore
import JSON

extension SandboxEHR {
    /// An authorization request that passed every check.
    struct AuthorizationRequest: Sendable {
        let client: SandboxClient
        let redirectURI: String
        let challenge: String
        let scope: String
        let state: String
        let nonce: String?
    }

    /// `GET /authorize`: checks the request, then approves an EHR launch at once (with the
    /// launch's patient and encounter) or shows a patient picker for a standalone launch.
    func authorize(_ request: Request) async throws -> Response {
        let checked: AuthorizationRequest
        switch await checkAuthorization(request) {
        case .success(let value): checked = value
        case .failure(let refusal): return refusal.response
        }
        if await state.takeDenial() {
            return errorRedirect(checked.redirectURI, "access_denied", "The user declined the request", state: checked.state)
        }
        if let launch = request.queryParameter("launch") {
            guard let context = await state.launch(launch) else {
                return errorRedirect(checked.redirectURI, "invalid_request", "unknown launch", state: checked.state)
            }
            return await issue(checked, patient: context.patient, encounter: context.encounter)
        }
        if checked.scope.split(separator: " ").contains("launch/patient") {
            return patientPicker(request)
        }
        return await issue(checked, patient: nil, encounter: nil)
    }

    /// `GET /authorize/approve`: the patient picker's choice. The original parameters come
    /// back with it and are checked again, so this is no way around `/authorize`'s checks.
    func approve(_ request: Request) async throws -> Response {
        let checked: AuthorizationRequest
        switch await checkAuthorization(request) {
        case .success(let value): checked = value
        case .failure(let refusal): return refusal.response
        }
        guard let patient = request.queryParameter("patient"), data.resources["Patient"]?[patient] != nil else {
            return page("Unknown patient", "<p>Choose one of the listed patients.</p>", status: .badRequest)
        }
        return await issue(checked, patient: patient, encounter: nil)
    }

    /// A refused authorization request, already turned into its response.
    struct Refusal: Error { let response: Response }

    /// RFC 6749 §4.1.2.1: without a known client and a registered redirect URI the error is
    /// shown to the user; every later problem goes back to the client as an error redirect.
    private func checkAuthorization(_ q: Request) async -> Result<AuthorizationRequest, Refusal> {
        guard let clientID = q.queryParameter("client_id"), let client = await state.client(clientID) else {
            return .failure(Refusal(response: page("Unknown client", "<p>The client_id is not registered with this sandbox.</p>",
                                                   status: .badRequest)))
        }
        guard let redirectURI = q.queryParameter("redirect_uri"), client.redirectURIs.contains(redirectURI) else {
            return .failure(Refusal(response: page("Unregistered redirect_uri", "<p>The redirect_uri is not registered for this client.</p>",
                                                   status: .badRequest)))
        }
        let stateParam = q.queryParameter("state")
        func fail(_ error: String, _ description: String) -> Result<AuthorizationRequest, Refusal> {
            .failure(Refusal(response: errorRedirect(redirectURI, error, description, state: stateParam)))
        }
        guard q.queryParameter("response_type") == "code" else { return fail("unsupported_response_type", "response_type must be code") }
        guard q.queryParameter("code_challenge_method") == "S256", let challenge = q.queryParameter("code_challenge"),
              (43...128).contains(challenge.count) else {
            return fail("invalid_request", "PKCE S256 is required")
        }
        guard let aud = q.queryParameter("aud"), aud.trimmingSuffix("/") == fhirBaseURL else {
            return fail("invalid_request", "aud is not this FHIR server")
        }
        guard let stateParam, !stateParam.isEmpty else { return fail("invalid_request", "state is required") }
        return .success(AuthorizationRequest(client: client, redirectURI: redirectURI, challenge: challenge,
                                             scope: q.queryParameter("scope") ?? "", state: stateParam,
                                             nonce: q.queryParameter("nonce")))
    }

    /// An error response to the client; RFC 9207 §2 puts `iss` on error responses too.
    private func errorRedirect(_ redirectURI: String, _ error: String, _ description: String, state: String?) -> Response {
        .redirect(to: appendQuery(redirectURI, [("error", error), ("error_description", description)]
            + (state.map { [("state", $0)] } ?? []) + (options.issParameter ? [("iss", issuer)] : [])))
    }

    private func issue(_ request: AuthorizationRequest, patient: String?, encounter: String?) async -> Response {
        let lifetime = await state.codeLifetime
        let grant = SandboxState.Grant(clientID: request.client.id, redirectURI: request.redirectURI, challenge: request.challenge,
                                       scope: request.scope, nonce: request.nonce, patient: patient, encounter: encounter,
                                       expiresAt: Date().addingTimeInterval(Double(lifetime)))
        let code = await state.issueCode(grant)
        var items = [("code", code), ("state", request.state)]
        if options.issParameter { items.append(("iss", issuer)) }
        return .redirect(to: appendQuery(request.redirectURI, items))
    }

    private func patientPicker(_ request: Request) -> Response {
        let kept = request.queryItems.filter { $0.name != "patient" }.map { ($0.name, $0.value) }
        let rows = SandboxData.patients.map { p in
            let href = "/authorize/approve?" + PercentEncoding.formEncode(kept + [("patient", p.id)])
            return "<li><a href=\"\(escape(href))\">\(escape(p.given)) \(escape(p.family))</a> <small>born \(escape(p.birthDate))</small></li>"
        }.joined()
        return page("Choose a patient", "<p>The app asks to open a patient's record.</p><ul id=\"patients\">\(rows)</ul>")
    }

    /// `GET /launch-ehr?app=URL&patient=ID`: the EHR opens the app with `iss` and `launch`;
    /// `app` must be on a registered client's origin.
    func launchEHR(_ request: Request) async throws -> Response {
        guard let app = request.queryParameter("app"), let components = URLComponents(string: app),
              let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https", components.host?.isEmpty == false else {
            return page("Bad request", "<p>app must be an http(s) URL.</p>", status: .badRequest)
        }
        guard await state.isRegisteredAppOrigin(app) else {
            return page("Bad request", "<p>app must be on the origin of a registered client's redirect URI.</p>", status: .badRequest)
        }
        let patient = request.queryParameter("patient") ?? "pat-1"
        guard data.resources["Patient"]?[patient] != nil else { return page("Unknown patient", "", status: .badRequest) }
        let launch = await state.newLaunch(patient: patient)
        return .redirect(to: appendQuery(app, [("iss", fhirBaseURL), ("launch", launch)]))
    }

    func page(_ title: String, _ body: String, status: HTTPStatus = .ok) -> Response {
        let html = "<!doctype html><html><head><meta charset=\"utf-8\"><title>\(escape(title)) · SMART sandbox EHR</title>"
            + "<style>body{font:16px system-ui;margin:3em;max-width:40em}li{margin:.5em 0}</style></head>"
            + "<body><h1>\(escape(title))</h1>\(body)<p><small>smart-bff sandbox EHR: test data only.</small></p></body></html>"
        var response = Response(status: status, contentType: "text/html; charset=utf-8", body: Array(html.utf8))
        response.headers.replace("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
        response.headers.replace("Cache-Control", "no-store")
        return response
    }

    func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;").replacingOccurrences(of: "'", with: "&#39;")
    }

    /// `url` with `items` added to its query, before any fragment (`#…` stays last).
    func appendQuery(_ url: String, _ items: [(String, String)]) -> String {
        let hash = url.firstIndex(of: "#") ?? url.endIndex
        let base = url[..<hash]
        return base + (base.contains("?") ? "&" : "?") + PercentEncoding.formEncode(items) + url[hash...]
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        var s = self
        while s.hasSuffix(suffix) { s.removeLast(suffix.count) }
        return s
    }
}
