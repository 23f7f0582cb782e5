import Cryptography
import Foundation
import HTTPCore
import JSON

extension SandboxEHR {
    static let lastModified = "Sun, 01 Nov 2026 09:00:00 GMT"

    /// `GET /fhir/{type}[/{id}]`: read and search over the bundled data, with paging. Needs a
    /// live bearer token; a token whose scopes are all `patient/` ones sees only its patient.
    func fhir(_ request: Request) async -> Response {
        var response = await fhirResponse(request)
        if let coding = await state.fhirContentEncoding { response.headers.replace("Content-Encoding", coding) }
        return response
    }

    private func fhirResponse(_ request: Request) async -> Response {
        await state.record(ReceivedRequest(method: request.method, target: request.target, headers: request.headers.map { $0 }))
        if let delay = await state.fhirDelay {
            await state.delaying(true)
            try? await Task.sleep(for: delay)
            await state.delaying(false)
        }
        if await state.fhirDown { return outcome(.serviceUnavailable, "transient", "The FHIR server is down (sandbox fail mode).") }
        guard let auth = request.headers["Authorization"], auth.hasPrefix("Bearer "),
              let token = await state.validAccessToken(String(auth.dropFirst(7))) else {
            var r = outcome(.unauthorized, "login", "A valid bearer token is required.")
            r.headers.replace("WWW-Authenticate", "Bearer")
            return r
        }
        let parts = (request.pathParameters["*"] ?? "").split(separator: "/").map(String.init)
        if await state.closeMidBody { return truncatedBody(length: Int(request.queryParameter("size") ?? "") ?? 200_000) }
        let bound = token.boundPatient
        let paging: Paging = await state.hapiPaging ? .hapi : .offset
        switch parts.count {
        case 0 where request.queryParameter("_getpages") != nil: return page(request, boundPatient: bound)
        case 1: return search(parts[0], request.queryItems, boundPatient: bound, paging: paging)
        case 2 where parts[0] == "Binary" && parts[1] == "large": return largeBody(request)
        case 2: return read(parts[0], parts[1], request, boundPatient: bound)
        default: return outcome(.notFound, "not-found", "Unknown path.")
        }
    }

    private func read(_ type: String, _ id: String, _ request: Request, boundPatient: String?) -> Response {
        guard let resource = data.resources[type]?[id] else { return outcome(.notFound, "not-found", "\(type)/\(id) is not known.") }
        if let boundPatient, let owner = SandboxData.patient(of: resource), owner != boundPatient {
            return outcome(.forbidden, "forbidden", "The token is for another patient.")
        }
        if request.headers["If-None-Match"] == "W/\"1\"" {
            return Response(status: .notModified, headers: ["ETag": "W/\"1\"", "Last-Modified": SandboxEHR.lastModified])
        }
        var r = fhirJSON(resource.setting("meta", ["versionId": "1", "lastUpdated": "2026-11-01T09:00:00Z"]))
        r.headers.replace("ETag", "W/\"1\"")
        r.headers.replace("Last-Modified", SandboxEHR.lastModified)
        r.headers.add("Set-Cookie", "ehr_internal=1; Path=/")
        return r
    }

    /// How a search's Bundle links to its other pages.
    enum Paging {
        /// `{base}/{type}?{query}&_count=C&_offset=N`.
        case offset
        /// HAPI FHIR's: `{base}?_getpages=<search id>&_getpagesoffset=N&_count=C&_bundletype=searchset`,
        /// the search id naming the type and query (`page` reads them back).
        case hapi
    }

    private func search(_ type: String, _ query: [(name: String, value: String)], boundPatient: String?, paging: Paging,
                        offsetParameter: String = "_offset") -> Response {
        guard let all = data.resources[type] else { return outcome(.notFound, "not-supported", "\(type) is not supported.") }
        func parameter(_ name: String) -> String? { query.first { $0.name == name }?.value }
        var patient = parameter("patient") ?? parameter("subject").map { $0.replacingOccurrences(of: "Patient/", with: "") }
        if let boundPatient, all.values.contains(where: { SandboxData.patient(of: $0) != nil }) {
            if type == "Patient", let id = parameter("_id"), id != boundPatient { patient = id }
            guard patient == nil || patient == boundPatient else { return outcome(.forbidden, "forbidden", "The token is for another patient.") }
            patient = boundPatient
        }
        let matches = data.search(type, patient: patient, category: parameter("category"), id: parameter("_id"))
        let count = max(1, min(50, Int(parameter("_count") ?? "") ?? 10))
        let offset = max(0, Int(parameter(offsetParameter) ?? "") ?? 0)
        let page = Array(matches.dropFirst(offset).prefix(count))
        let kept = query.filter { $0.name != offsetParameter && $0.name != "_count" }.map { ($0.name, $0.value) }
        func link(_ relation: String, _ start: Int) -> JSONValue {
            let url = switch paging {
            case .offset:
                fhirBaseURL + "/" + type + "?" + PercentEncoding.formEncode(kept + [("_count", String(count)), ("_offset", String(start))])
            case .hapi:
                fhirBaseURL + "?" + PercentEncoding.formEncode([("_getpages", SandboxEHR.searchID(type, kept)), ("_getpagesoffset", String(start)),
                                                                ("_count", String(count)), ("_bundletype", "searchset")])
            }
            return ["relation": .string(relation), "url": .string(url)]
        }
        var links: [JSONValue] = [link("self", offset)]
        if offset + count < matches.count { links.append(link("next", offset + count)) }
        if offset > 0 { links.append(link("previous", max(0, offset - count))) }
        let bundle: JSONValue = [
            "resourceType": "Bundle", "type": "searchset", "total": .number(Double(matches.count)), "link": .array(links),
            "entry": .array(page.map { ["fullUrl": .string(fhirBaseURL + "/" + type + "/" + ($0["id"]?.stringValue ?? "")),
                                        "resource": $0, "search": ["mode": "match"]] }),
        ]
        return fhirJSON(bundle)
    }

    /// `GET {base}?_getpages=<search id>&_getpagesoffset=N&_count=C`: a page of a search that
    /// paged HAPI FHIR's way, the search read back from its id.
    private func page(_ request: Request, boundPatient: String?) -> Response {
        guard let id = request.queryParameter("_getpages"), let (type, query) = SandboxEHR.search(named: id) else {
            return outcome(.notFound, "not-found", "No such search.")
        }
        let position = request.queryItems.filter { $0.name == "_getpagesoffset" || $0.name == "_count" }
        return search(type, query + position, boundPatient: boundPatient, paging: .hapi, offsetParameter: "_getpagesoffset")
    }

    /// A search's id in HAPI-style paging links: its type and query, base64url-encoded.
    static func searchID(_ type: String, _ query: [(String, String)]) -> String {
        Base64URL.encode(Array((type + "?" + PercentEncoding.formEncode(query)).utf8))
    }

    /// The type and query a `searchID` names.
    static func search(named id: String) -> (type: String, query: [(name: String, value: String)])? {
        guard let bytes = Base64URL.decode(id), let text = String(validating: bytes, as: UTF8.self),
              let mark = text.firstIndex(of: "?") else { return nil }
        let query = text[text.index(after: mark)...].split(separator: "&").compactMap { pair -> (name: String, value: String)? in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = PercentEncoding.decodeFormComponent(parts[0]),
                  let value = parts.count > 1 ? PercentEncoding.decodeFormComponent(parts[1]) : "" else { return nil }
            return (name, value)
        }
        return (String(text[..<mark]), query)
    }

    /// A JSON body of `size` bytes (default 4 MiB), streamed: for streaming tests. The state
    /// counts whether it was sent whole or cut short.
    private func largeBody(_ request: Request) -> Response {
        let size = max(64, min(64 << 20, Int(request.queryParameter("size") ?? "") ?? 4 << 20))
        let prefix = Array(#"{"resourceType":"Binary","data":""#.utf8), suffix = Array(#""}"#.utf8)
        let fill = size - prefix.count - suffix.count
        let state = self.state
        return Response(status: .ok, headers: ["Content-Type": "application/fhir+json"], body: .stream(length: size) { writer in
            do {
                try await writer.write(prefix)
                var left = fill
                let chunk = [UInt8](repeating: UInt8(ascii: "A"), count: 64 * 1024)
                while left > 0 {
                    let n = min(left, chunk.count)
                    try await writer.write(Array(chunk[0..<n]))
                    left -= n
                }
                try await writer.write(suffix)
            } catch {
                await state.countStream(sentWhole: false)
                throw error
            }
            await state.countStream(sentWhole: true)
        })
    }

    /// Declares a body of `length` bytes (`?size=`, 2 to 64 MiB; default 200 000), sends
    /// half, then fails: the connection closes mid-body.
    private func truncatedBody(length: Int) -> Response {
        let length = max(2, min(64 << 20, length))
        return Response(status: .ok, headers: ["Content-Type": "application/fhir+json"], body: .stream(length: length) { writer in
            try await writer.write([UInt8](repeating: UInt8(ascii: " "), count: length / 2))
            struct MidBodyFailure: Error {}
            throw MidBodyFailure()
        })
    }

    func outcome(_ status: HTTPStatus, _ code: String, _ text: String) -> Response {
        fhirJSON(["resourceType": "OperationOutcome", "issue": [["severity": "error", "code": .string(code), "diagnostics": .string(text)]]],
                 status: status)
    }
}
