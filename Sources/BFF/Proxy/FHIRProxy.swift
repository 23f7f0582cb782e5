import Foundation
import HTTPClient
import HTTPCore
import SMART
import Sessions

/// `GET`/`HEAD /fhir/{path}?{query}`: the EHR's response to `{iss}/{path}?{query}` with the
/// launch's bearer token (and `/fhir?_getpages=…`, a page of search results at the base,
/// to `{iss}?_getpages=…`). Only `Accept`, `If-None-Match` and `If-Modified-Since` of the
/// browser's request go upstream; only status, body, `Content-Type`, `ETag`,
/// `Last-Modified` and a rewritten `Location` come back, with `Cache-Control: no-store` and
/// a sandboxing `Content-Security-Policy`.
/// Bodies stream through; a truncated upstream body ends the connection, never a clean 200.
struct FHIRProxy: Sendable {
    let services: BFFServices
    let refresher: TokenRefresher

    func handle(_ request: Request) async throws -> Response {
        let path = request.pathParameters["*"] ?? ""
        if let problem = FHIRPath.problem(path: path, query: request.query) { throw Problems.badRequest(problem, type: "unsafe-fhir-path") }
        if path.isEmpty, request.path != "/fhir" {
            throw Problems.badRequest("A page of search results is read at /fhir?_getpages=…, with no slash after fhir.", type: "unsafe-fhir-path")
        }
        // Fail closed: no PHI read that the audit trail could not record.
        guard !services.audit.isBackedUp else { throw Problems.auditUnavailable() }
        let entry = try await SessionResolver(services: services).resolveForProxy(request)
        let (launch, context) = (entry.launch, entry.context)
        try checkScopes(entry.scopes, path: path, request: request)
        let query = try FHIRProxy.upstreamQuery(path: path, query: request.query, pages: entry.pages)
        // What the audit trail records: what the EHR is asked for.
        let target = "/" + path + (query.map { "?" + $0 } ?? "")

        // The common case needs no refresh and no lock: the token came with the session query.
        var token: String
        var version = context.tokenVersion
        if let access = context.accessToken, !TokenRefresher.isExpiring(context.accessTokenExpiresAt, now: services.now()) {
            token = access
        } else {
            let tokens = try await refresher.tokens(for: launch)
            (token, version) = (tokens.accessToken, tokens.version)
        }
        let url = FHIRProxy.upstreamURL(base: launch.iss, path: path, query: query)
        var (upstream, askedAt) = try await send(request, launch: launch, url: url, target: target, token: token)
        if upstream.status == 401 {
            // The EHR was asked and refused: in the trail as it was, whatever the refresh brings.
            auditRecorder(request: request, launch: launch, target: target, status: upstream.status, at: askedAt).complete(0)
            upstream.body.cancel()
            // Once: the EHR may have ended the token early.
            let tokens = try await refresher.tokens(for: launch, staleVersion: version)
            services.proxyCache.invalidate(launchHash: launch.idHash) // whether or not this call refreshed
            token = tokens.accessToken
            (upstream, askedAt) = try await send(request, launch: launch, url: url, target: target, token: token)
        }
        return try await respond(upstream, request: request, launch: launch, target: target, askedAt: askedAt, rewriter: entry.rewriter,
                                 mask: TokenMask(token: token))
    }

    /// The query the EHR gets: the front end's, but for a page at the base, whose search id
    /// is bound to a launch (`PageBinding`): that must be this launch, and the id goes up
    /// without its tag. (`FHIRPath.problem` saw to it that there is one `_getpages`.)
    static func upstreamQuery(path: String, query: String?, pages: PageBinding) throws -> String? {
        guard path.isEmpty, let query else { return query }
        let parameter = "_getpages="
        return try query.split(separator: "&").map { pair in
            guard pair.hasPrefix(parameter) else { return pair }
            guard let id = pages.id(fromBound: pair.dropFirst(parameter.utf8.count)) else { throw Problems.pageOfAnotherLaunch() }
            return parameter + id
        }.joined(separator: "&")
    }

    /// The upstream status an audit entry carries when the EHR gave no response head.
    static let noAnswer = 0

    /// The redirect statuses, which go on only with a `Location` under the EHR's base.
    private static let redirects: Set<Int> = [301, 302, 303, 307, 308]

    /// The EHR's response fields passed on as they are (besides a rewritten `Location`).
    private static let passedFields = ["Content-Type", "ETag", "Last-Modified"]

    /// The front end's conditional-request fields, passed on as they are.
    private static let conditionalFields = ["If-None-Match", "If-Modified-Since"]

    /// The `Accept` sent upstream: the front end's, unless it names no type (none, an empty
    /// one, or only `*/*`, what `fetch()` sends unless told otherwise): then FHIR JSON, the form whose
    /// paging links and references the proxy rewrites, where an EHR left to choose may
    /// answer XML.
    static func upstreamAccept(_ given: String?) -> String {
        guard let given, given.utf8.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) else { return "application/fhir+json" }
        guard given.utf8.contains(UInt8(ascii: "*")) else { return given }
        let namesNoType = given.split(separator: ",").allSatisfy {
            ($0.split(separator: ";", maxSplits: 1).first ?? "").trimmingCharacters(in: .whitespaces) == "*/*"
        }
        return namesNoType ? "application/fhir+json" : given
    }

    /// `base/path?query` (`base?query` for a page at the base), built in one string.
    private static func upstreamURL(base: String, path: String, query: String?) -> String {
        var url = ""
        url.reserveCapacity(base.utf8.count + path.utf8.count + (query?.utf8.count ?? 0) + 2)
        url += base
        if !path.isEmpty { url += "/"; url += path }
        if let query { url += "?"; url += query }
        return url
    }

    /// The path's resources, and those the query reaches besides (`FHIRQueryReach`), must be
    /// within the launch's scopes.
    /// A query with `;` is checked as split at `&` alone and as split at `;` too: the EHR may
    /// read it either way, and each reading must be allowed (`scopeCheckedItems`).
    private func checkScopes(_ scopes: SMARTScopes, path: String, request: Request) throws {
        try checkScopes(scopes, path: path, query: FHIRProxy.scopeCheckedItems(request.query, splittingAtSemicolons: false))
        if request.query?.utf8.contains(UInt8(ascii: ";")) == true {
            try checkScopes(scopes, path: path, query: FHIRProxy.scopeCheckedItems(request.query, splittingAtSemicolons: true))
        }
    }

    private func checkScopes(_ scopes: SMARTScopes, path: String, query: [(name: String, value: String)]) throws {
        switch FHIRInteraction(path: path).access {
        case .open:
            break
        case .someSearch:
            guard scopes.allowsSomeSearch else {
                throw Problems.outsideScopes("The launch's scopes do not allow a page of search results: they allow no search.")
            }
        case let .resources(type, interaction):
            guard !scopes.allows(type, interaction, query: query) else { break }
            let what = switch (type, interaction) {
            case ("*", .history): "the history of all resources, which needs a wildcard scope such as patient/*.rs with no restriction"
            case (_, .operation): "this operation: its results are not of one resource type, and its parameters are not search filters,"
                + " so it needs a wildcard scope such as patient/*.rs with no restriction"
            case ("*", _): "this request: its results are not of one resource type, which needs a wildcard scope such as patient/*.rs"
            case (_, .history): "the history of all \(type) resources: history takes no search parameters, so it needs a search"
                + " scope for \(type) with no restriction such as ?category="
            case (_, .search): "searching \(type)"
            case (_, .read): "reading \(type)"
            case (_, .include): "including \(type)"
            case (_, .filter): "filtering on \(type) data"
            }
            throw Problems.outsideScopes("The launch's scopes do not allow \(what).")
        }
        if let refused = FHIRQueryReach.firstRefused(in: query, by: scopes) { throw Problems.outsideScopes(refused.refusal) }
    }

    /// The query's pairs as the scope check reads them: split at `&`, and with
    /// `splittingAtSemicolons` at `;` as well, as some servers split queries (older Python, Go
    /// before 1.17, older Rack). A query is checked both ways: a parameter such as
    /// `_revinclude` after a `;` is refused, and so is a restriction met only after one
    /// (`_count=5;category=laboratory`), which an EHR that does not split there never applies.
    /// (`FHIRPath.problem` saw to it that every pair decodes.)
    static func scopeCheckedItems(_ query: String?, splittingAtSemicolons: Bool) -> [(name: String, value: String)] {
        guard let query else { return [] }
        return query.split(whereSeparator: { $0 == "&" || (splittingAtSemicolons && $0 == ";") }).compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = PercentEncoding.decodeFormComponent(parts[0]),
                  let value = parts.count > 1 ? PercentEncoding.decodeFormComponent(parts[1]) : "" else { return nil }
            return (name: name, value: value)
        }
    }

    /// The upstream's response head; a read that gets none (the EHR did not answer in time,
    /// could not be reached, or broke off, or the browser went away first: then the request is
    /// cancelled) is in the audit trail with upstream status 0: the EHR may have read the data
    /// even so.
    private func send(_ request: Request, launch: LaunchRecord, url: String, target: String, token: String) async throws
        -> (response: HTTPClientStreamingResponse, askedAt: Date) {
        let iss = launch.iss
        let askedAt = services.now() // the read's time in the trail, however long the EHR takes
        var headers: [(String, String)] = []
        headers.reserveCapacity(2 + FHIRProxy.conditionalFields.count)
        headers.append(("Authorization", "Bearer " + token))
        headers.append(("Accept", FHIRProxy.upstreamAccept(request.headers["Accept"])))
        for name in FHIRProxy.conditionalFields {
            if let value = request.headers[name] { headers.append((name, value)) }
        }
        // The browser has gone (the route is cancelled when it leaves): nothing goes upstream.
        if Task.isCancelled { throw CancellationError() }
        let started = ContinuousClock.now
        let response: HTTPClientStreamingResponse
        do {
            // One launch's reads never take the EHR connections kept for others (16 of 64):
            // one front end's many slow reads do not hold up everyone else's.
            response = try await services.http.stream(HTTPClientRequest(method: request.method, url: url, headers: headers,
                                                                        share: launch.idHash))
        } catch {
            // Never sent: this launch's own reads kept it waiting, not the EHR.
            if error.isShareBusy { throw Problems.tooManyReads() }
            auditRecorder(request: request, launch: launch, target: target, status: FHIRProxy.noAnswer, at: askedAt).complete(0)
            if Task.isCancelled { throw CancellationError() } // the browser went: no fault of the EHR's
            services.metrics.recordUpstreamError(FHIRProxy.errorKind(error))
            // This process is stopping: the HTTP client went with the server's I/O threads,
            // after the browser's connection was closed. Logged and counted as such, not as
            // the EHR's failure (no browser gets this answer).
            if error.isCancelled { throw Problems.stopping() }
            if !error.isTruncated && !error.isCancelled { services.upstreamFailures.failed(iss: iss, detail: error.debugDescription, now: services.now()) }
            if error.isTimeout { throw Problems.upstream(.gatewayTimeout, "The EHR did not answer in time.") }
            throw Problems.upstream(.badGateway, "The EHR could not be reached or answered badly.")
        }
        services.metrics.recordUpstream(seconds: (ContinuousClock.now - started).seconds)
        services.upstreamFailures.answered(iss: iss, now: services.now())
        if FHIRProxy.isServerFailure(response.status) {
            // Passed through as it came, and counted: the operator sees which EHR is failing.
            services.metrics.recordUpstreamError("server_error")
            services.upstreamFailures.serverError(iss: iss, status: response.status, now: services.now())
        }
        if Task.isCancelled { // the browser went as the head came: nothing more is read
            response.body.cancel()
            auditRecorder(request: request, launch: launch, target: target, status: response.status, at: askedAt).brokenOff(after: 0)
            throw CancellationError()
        }
        return (response, askedAt)
    }

    /// The `kind` label under which `bff_upstream_errors_total` counts a failed request.
    /// A body can break off before its head is handed over (all of it arrived in one go): that
    /// EHR was reached, and the failure is a truncation. Cancelled: this process stopped while
    /// the EHR was still answering; stalled: the browser, behind, took nothing for the stall
    /// timeout. Neither is the EHR's fault. Malformed: the EHR was reached, but what it
    /// answered is not a well-framed HTTP/1.1 response.
    static func errorKind(_ error: HTTPClientError) -> String {
        error.isTimeout ? "timeout" : error.isTLSFailure ? "tls" : error.isTruncated ? "truncated"
            : error.isCancelled ? "cancelled" : error.isStalled ? "stalled" : error.isMalformed ? "malformed" : "unreachable"
    }

    /// A `Location` as an absolute URL: a relative reference (RFC 9110 §10.2.2) resolved
    /// against the URL the EHR was asked for (`askedFor`); nil when it cannot be.
    static func absolute(_ location: String, askedFor: String) -> String? {
        let lower = location.prefix(8).lowercased()
        if lower.hasPrefix("http://") || lower.hasPrefix("https://") { return location }
        return URL(string: location, relativeTo: URL(string: askedFor))?.absoluteURL.absoluteString
    }

    /// Whether the EHR's status says its server failed (500, 502–599). 501 says only that it
    /// does not do what was asked (an operation it lacks), which the front end may well ask.
    static func isServerFailure(_ status: Int) -> Bool { status >= 500 && status != 501 }

    /// Bodies up to this size (by `Content-Length`) are read whole and answered at once;
    /// larger or unsized ones stream through.
    static let bufferLimit = 256 * 1024

    /// The EHR's response as the front end gets it; `mask` hides the access token wherever
    /// the EHR echoed it.
    private func respond(_ upstream: HTTPClientStreamingResponse, request: Request, launch: LaunchRecord, target: String, askedAt: Date,
                         rewriter: URLRewriter, mask: TokenMask) async throws -> Response {
        var response = Response(status: HTTPStatus(code: upstream.status), headers: HTTPHeaders(minimumCapacity: 5))
        for name in FHIRProxy.passedFields {
            if let value = upstream.header(name) { response.headers.add(name, mask.masked(value)) }
        }
        // Only a URL under the EHR's base goes on, as the BFF's: the BFF sends browsers to
        // no other place (a redirect to one is the EHR's bad answer, refused below).
        if let location = upstream.header("Location").flatMap({ FHIRProxy.absolute($0, askedFor: launch.iss + target) })
            .flatMap(rewriter.rewritten(url:)) {
            response.headers.add("Location", mask.masked(location))
        }
        response.headers.replace("Cache-Control", "no-store")
        // The body is the EHR's (a Binary may be any type, HTML included): should a browser
        // ever render one as a page at the BFF's origin, where the session cookie lives, it
        // runs no script and loads nothing. (Navigations cannot send X-CSRF, so today they
        // are refused before any upstream call; this is the second line.)
        response.headers.replace("Content-Security-Policy", "default-src 'none'; sandbox")
        let rewrite = upstream.header("Content-Type").map(FHIRProxy.isJSON) ?? false
        // As the client's framing read it: a Content-Length sent beside chunked coding is not
        // the body's length (RFC 9112 §6.3), and is not passed on.
        let declared = upstream.declaredLength
        let audit = auditRecorder(request: request, launch: launch, target: target, status: upstream.status, at: askedAt)
        let body = upstream.body
        if FHIRProxy.redirects.contains(upstream.status), response.headers["Location"] == nil {
            body.cancel()
            audit.brokenOff(after: 0)
            services.metrics.recordUpstreamError("redirect")
            throw Problems.upstream(.badGateway, "The EHR redirected the read outside its FHIR base, where the BFF sends no browser.")
        }
        let bodyless = request.method == "HEAD" || upstream.status == 204 || upstream.status == 304
        if bodyless {
            body.cancel()
            audit.complete(0)
            // HEAD keeps the upstream length (when the body would not be rewritten); no bytes follow.
            response.body = .stream(length: request.method == "HEAD" && !rewrite ? FHIRProxy.lengthOfGET(upstream) : nil) { _ in }
            return response
        }
        // Every field counts: a second `Content-Encoding: gzip` after `identity` would put a
        // body no mask or rewriting can read in front of the browser.
        let codings = upstream.headers.values(named: "Content-Encoding")
        if codings.contains(where: { !$0.trimmingCharacters(in: .whitespaces).equalsIgnoringASCIICase("identity") }) {
            // Asked for identity (HTTPClient does), sent something else: passed on without its
            // Content-Encoding (not a header the front end gets) it would look like a corrupt
            // resource, and the URL rewriting could not read it.
            body.cancel()
            audit.brokenOff(after: 0)
            services.metrics.recordUpstreamError("encoding")
            throw Problems.upstream(.badGateway, "The EHR sent a content coding that was not asked for.")
        }
        if let declared, declared <= FHIRProxy.bufferLimit {
            let bytes: [UInt8]
            do { bytes = try await body.collect(limit: FHIRProxy.bufferLimit) } catch {
                audit.brokenOff(after: 0)
                if Task.isCancelled { throw CancellationError() }
                services.metrics.recordUpstreamError(FHIRProxy.errorKind(error))
                if error.isTimeout { throw Problems.upstream(.gatewayTimeout, "The EHR stopped sending its response.") }
                throw Problems.upstream(.badGateway, "The EHR's response ended early.")
            }
            let passedOn = mask.masked(whole: rewrite ? rewriter.rewrite(whole: bytes) : bytes)
            audit.complete(Int64(passedOn.count)) // what the browser is sent, rewritten
            response.body = .bytes(passedOn)
            return response
        }
        // A body the EHR ended by closing its connection may have been cut short, which its
        // close does not say: passed on delimited the same way, not given a chunked end.
        response.endsAtClose = upstream.endsAtClose
        response.body = .stream(length: rewrite ? nil : declared) { writer in
            var (rewriter, mask) = (rewriter, mask)
            var bytes: Int64 = 0 // passed on: rewritten, and counted once written
            func passOn(_ piece: [UInt8]) async throws {
                try await writer.write(piece)
                bytes += Int64(piece.count)
            }
            do {
                for try await chunk in body {
                    try await passOn(mask.masked(rewrite ? rewriter.rewrite(chunk) : chunk))
                }
                if rewrite { try await passOn(mask.masked(rewriter.finish())) }
                try await passOn(mask.finish())
                audit.complete(bytes)
            } catch {
                // The EHR's side failed, or, while a write to a browser that took nothing
                // waited, its transfer was given up as stalled. (A write to a browser that has
                // gone throws another error, and a browser gone cancels this task: then a
                // transfer cut short is no failure.)
                if !Task.isCancelled, let failure = error as? HTTPClientError ?? body.failure {
                    services.metrics.recordUpstreamError(FHIRProxy.errorKind(failure))
                }
                body.cancel()
                audit.brokenOff(after: bytes)
                throw error // the connection closes without completing the message
            }
        }
        return response
    }

    /// The length a response to HEAD gives for the GET's body: its Content-Length, unless a
    /// Transfer-Encoding says that body would be chunked (RFC 9112 §6.3: then the
    /// Content-Length does not count). No body framed the HEAD response itself, so the
    /// client's `declaredLength` is nil for it.
    private static func lengthOfGET(_ upstream: HTTPClientStreamingResponse) -> Int? {
        guard upstream.header("Transfer-Encoding") == nil else { return nil }
        return upstream.header("Content-Length").flatMap(Int.init)
    }

    /// Whether a Content-Type is JSON (`application/fhir+json`, `application/json`, ...),
    /// whose URLs are rewritten: "json" in any case. A byte scan: Foundation's
    /// `String.contains` and the standard library's generic `firstRange(of:)` each took about
    /// 5% of the proxy's instructions.
    static func isJSON(_ contentType: String) -> Bool {
        let json = FHIRProxy.json
        var matched = 0
        for byte in contentType.utf8 {
            let lower = byte | 0x20 // ASCII letters to lower case; no other byte becomes one of "json"
            if lower == json[matched] {
                matched += 1
                if matched == json.count { return true }
            } else {
                matched = lower == json[0] ? 1 : 0 // "json" repeats no prefix of itself
            }
        }
        return false
    }

    private static let json: [UInt8] = Array("json".utf8)

    /// The PHI access audit entry of a read, recorded once its response is through.
    /// `target`: the path and query the EHR was asked for; `at`: when it was asked.
    private func auditRecorder(request: Request, launch: LaunchRecord, target: String, status: Int, at: Date) -> PendingAuditEntry {
        PendingAuditEntry(entry: AuditEntry(at: at, launchHash: launch.idHash, iss: launch.iss, sub: launch.sub, fhirUser: launch.fhirUser,
                                            patient: launch.patient, method: request.method, pathAndQuery: target,
                                            upstreamStatus: status, bytes: 0),
                          writer: services.audit)
    }

    /// A read's audit entry, waiting for how its response ended.
    struct PendingAuditEntry: Sendable {
        let entry: AuditEntry
        let writer: AuditWriter

        /// The exchange ended as it should: the response reached the browser whole, `bytes` of
        /// body (none for a HEAD or a 304); or the EHR's 401 was answered by a refresh and a
        /// second read; or there was no answer at all (status 0), nothing to break off.
        func complete(_ bytes: Int64) { record(bytes, brokenOff: false) }

        /// The response did not reach the browser whole: it broke off after `bytes`, the
        /// browser left, or the BFF refused what the EHR sent.
        func brokenOff(after bytes: Int64) { record(bytes, brokenOff: true) }

        private func record(_ bytes: Int64, brokenOff: Bool) {
            var e = entry
            e.bytes = bytes
            e.brokenOff = brokenOff
            writer.record(e)
        }
    }
}
