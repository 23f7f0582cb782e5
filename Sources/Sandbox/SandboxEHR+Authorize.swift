import Cryptography
import Foundation
import HTTPCore
import JSON

extension SandboxEHR {
    /// `GET /authorize`: checks the request, then approves an EHR launch at once or shows
    /// a patient picker for a standalone launch.
    func authorize(_ request: Request) async throws -> Response {
        let q = request
        guard let clientID = q.queryParameter("client_id"), let client = await state.client(clientID) else {
            return page("Unknown client", "<p>The client_id is not registered with this sandbox.</p>", status: .badRequest)
        }
        guard let redirectURI = q.queryParameter("redirect_uri"), client.redirectURIs.contains(redirectURI) else {
            return page("Unregistered redirect_uri", "<p>The redirect_uri is not registered for this client.</p>", status: .badRequest)
        }
        let stateParam = q.queryParameter("state")
        func fail(_ error: String, _ description: String) -> Response {
            // RFC 9207 §2: error responses carry iss too.
            .redirect(to: appendQuery(redirectURI, [("error", error), ("error_description", description)]
                + (stateParam.map { [("state", $0)] } ?? []) + (options.issParameter ? [("iss", issuer)] : [])))
        }
        guard q.queryParameter("response_type") == "code" else { return fail("unsupported_response_type", "response_type must be code") }
        guard q.queryParameter("code_challenge_method") == "S256", let challenge = q.queryParameter("code_challenge"), challenge.count >= 43 else {
            return fail("invalid_request", "PKCE S256 is required")
        }
        guard let aud = q.queryParameter("aud"), aud.trimmingSuffix("/") == fhirBaseURL else { return fail("invalid_request", "aud is not this FHIR server") }
        guard stateParam != nil else { return fail("invalid_request", "state is required") }
        if await state.takeDenial() { return fail("access_denied", "The user declined the request") }
        let scope = q.queryParameter("scope") ?? ""
        if let launch = q.queryParameter("launch") {
            guard let context = await state.launch(launch) else { return fail("invalid_request", "unknown launch") }
            return await issue(client: client, redirectURI: redirectURI, challenge: challenge, scope: scope, request: q,
                               patient: context.patient, encounter: context.encounter)
        }
        if scope.split(separator: " ").contains("launch/patient") {
            return patientPicker(q)
        }
        return await issue(client: client, redirectURI: redirectURI, challenge: challenge, scope: scope, request: q, patient: nil, encounter: nil)
    }

    /// `GET /authorize/approve`: the patient picker's choice.
    func approve(_ request: Request) async throws -> Response {
        guard let patient = request.queryParameter("patient"), data.resources["Patient"]?[patient] != nil,
              let clientID = request.queryParameter("client_id"), let client = await state.client(clientID),
              let redirectURI = request.queryParameter("redirect_uri"), client.redirectURIs.contains(redirectURI),
              let challenge = request.queryParameter("code_challenge") else {
            return page("Bad request", "<p>Missing or unknown parameters.</p>", status: .badRequest)
        }
        return await issue(client: client, redirectURI: redirectURI, challenge: challenge, scope: request.queryParameter("scope") ?? "",
                           request: request, patient: patient, encounter: nil)
    }

    private func issue(client: SandboxClient, redirectURI: String, challenge: String, scope: String, request: Request,
                       patient: String?, encounter: String?) async -> Response {
        let grant = SandboxState.Grant(clientID: client.id, redirectURI: redirectURI, challenge: challenge, scope: scope,
                                       nonce: request.queryParameter("nonce"), patient: patient, encounter: encounter,
                                       expiresAt: Date().addingTimeInterval(60))
        let code = await state.issueCode(grant)
        var items = [("code", code), ("state", request.queryParameter("state") ?? "")]
        if options.issParameter { items.append(("iss", issuer)) }
        return .redirect(to: appendQuery(redirectURI, items))
    }

    private func patientPicker(_ request: Request) -> Response {
        let query = request.query ?? ""
        let rows = SandboxData.patients.map { p in
            "<li><a href=\"/authorize/approve?\(escape(query))&amp;patient=\(escape(p.id))\">\(escape(p.given)) \(escape(p.family))</a> "
                + "<small>born \(escape(p.birthDate))</small></li>"
        }.joined()
        return page("Choose a patient", "<p>The app asks to open a patient's record.</p><ul id=\"patients\">\(rows)</ul>")
    }

    /// `GET /launch-ehr?app=URL&patient=ID`: the EHR opens the app with `iss` and `launch`.
    func launchEHR(_ request: Request) async throws -> Response {
        guard let app = request.queryParameter("app"), let scheme = URLComponents(string: app)?.scheme?.lowercased(),
              scheme == "http" || scheme == "https" else {
            return page("Bad request", "<p>app must be an http(s) URL.</p>", status: .badRequest)
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
        return Response(status: status, contentType: "text/html; charset=utf-8", body: Array(html.utf8))
    }

    func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;").replacingOccurrences(of: "'", with: "&#39;")
    }

    func appendQuery(_ url: String, _ items: [(String, String)]) -> String {
        url + (url.contains("?") ? "&" : "?") + PercentEncoding.formEncode(items)
    }
}

extension SandboxState {
    func takeDenial() -> Bool {
        defer { denyNextAuthorization = false }
        return denyNextAuthorization
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        var s = self
        while s.hasSuffix(suffix) { s.removeLast(suffix.count) }
        return s
    }
}
