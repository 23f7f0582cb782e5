import Foundation
import HTTPClient
import Sandbox
import Synchronization

/// A minimal browser for tests: a cookie jar per origin-less host, no automatic redirects.
final class Browser: Sendable {
    let client: HTTPClient
    private let cookies = Mutex<[String: String]>([:])

    init(client: HTTPClient) { self.client = client }

    struct Page: Sendable {
        let status: Int
        let headers: [(name: String, value: String)]
        let body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
        func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
        var location: String? { header("Location") }
        var setCookies: [String] { headers.filter { $0.name.lowercased() == "set-cookie" }.map(\.value) }
    }

    @discardableResult
    func request(_ url: String, headers: [(String, String)] = [], body: [UInt8]? = nil) async throws -> Page {
        try await request("GET", url, headers: headers, body: body)
    }

    @discardableResult
    func request(_ method: String, _ url: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
                 sendCookies: Bool = true) async throws -> Page {
        var all = headers
        let jar = cookies.withLock { $0 }
        if sendCookies, !jar.isEmpty { all.append(("Cookie", jar.map { "\($0.key)=\($0.value)" }.joined(separator: "; "))) }
        let response = try await client.execute(HTTPClientRequest(method: method, url: url, headers: all, body: body))
        let page = Page(status: response.status, headers: Array(response.headers), body: response.body)
        for cookie in page.setCookies {
            let pair = cookie.split(separator: ";")[0]
            guard let eq = pair.firstIndex(of: "=") else { continue }
            let name = String(pair[..<eq]), value = String(pair[pair.index(after: eq)...])
            cookies.withLock { if value.isEmpty || cookie.contains("Max-Age=0") { $0[name] = nil } else { $0[name] = value } }
        }
        return page
    }

    /// An API call as the demo front end makes it.
    func api(_ url: String, launch: String? = nil, csrf: Bool = true, headers: [(String, String)] = []) async throws -> Page {
        try await api("GET", url, launch: launch, csrf: csrf, headers: headers)
    }

    func api(_ method: String, _ url: String, launch: String? = nil, csrf: Bool = true, headers: [(String, String)] = []) async throws -> Page {
        var h = headers
        if csrf { h.append(("X-CSRF", "1")) }
        if let launch { h.append(("X-BFF-Launch", launch)) }
        return try await request(method, url, headers: h)
    }

    var cookieValues: [String: String] { cookies.withLock { $0 } }
    func clearCookies() { cookies.withLock { $0.removeAll() } }
    func setCookie(_ name: String, _ value: String) { cookies.withLock { $0[name] = value } }
    func removeCookie(_ name: String) { cookies.withLock { $0[name] = nil } }
    /// Another tab's view of this browser as it is now: a jar of its own with the same cookies,
    /// which later responses to this one do not change (a request sent now, answered later).
    func snapshot() -> Browser {
        let copy = Browser(client: client)
        cookies.withLock { jar in copy.cookies.withLock { $0 = jar } }
        return copy
    }
}

extension Browser {
    /// Runs a standalone launch at the BFF at `base` against `sandbox` to the end; returns the
    /// callback's final page and the launch id.
    func standaloneLogin(at base: String, sandbox: SandboxEHR, patient: String = "pat-1", returnTo: String? = nil) async throws -> (page: Page, launch: String?) {
        let login = try await request(base + "/login" + (returnTo.map { "?return_to=" + $0.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! } ?? ""))
        guard login.status == 302, let authorize = login.location else { return (login, nil) }
        let picker = try await request(authorize)
        guard picker.status == 200, let range = picker.text.range(of: "href=\"/authorize/approve?[^\"]*patient=\(patient)\"", options: .regularExpression) else {
            return (picker, nil)
        }
        let href = String(picker.text[range]).dropFirst(6).dropLast().replacingOccurrences(of: "&amp;", with: "&")
        let approved = try await request(sandbox.baseURL + href)
        guard let callback = approved.location else { return (approved, nil) }
        let done = try await request(callback)
        return (done, Browser.launch(of: done))
    }

    /// `count` reads of `path` at once, each from a browser of its own holding this one's
    /// session cookie, spread over `bases` in turn; their statuses.
    func concurrentReads(_ count: Int, of path: String, launch: String?, over bases: [String]) async throws -> [Int] {
        let cookie = cookieValues["bff_session"] ?? ""
        return try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<count {
                group.addTask { [client] in
                    let b = Browser(client: client)
                    b.setCookie("bff_session", cookie)
                    return try await b.api(bases[i % bases.count] + path, launch: launch).status
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    /// The `bff_launch` a callback's redirect carries.
    static func launch(of callbackPage: Page) -> String? {
        callbackPage.location.flatMap { URLComponents(string: $0)?.queryItems?.first { $0.name == "bff_launch" }?.value }
    }
}

extension BFFHarness {
    /// Runs a standalone launch to the end; returns the callback's final page and the launch id.
    func standaloneLogin(_ browser: Browser, patient: String = "pat-1", bff index: Int = 0, returnTo: String? = nil) async throws -> (page: Browser.Page, launch: String?) {
        try await browser.standaloneLogin(at: "http://127.0.0.1:\(bffs[index].port)", sandbox: sandbox, patient: patient, returnTo: returnTo)
    }

    /// Runs an EHR launch from the sandbox's launch entry to the end.
    func ehrLaunch(_ browser: Browser, patient: String = "pat-2", bff index: Int = 0) async throws -> (page: Browser.Page, launch: String?) {
        let base = "http://127.0.0.1:\(bffs[index].port)"
        let entry = try await browser.request(sandbox.ehrLaunchURL(app: base + "/launch", patient: patient))
        let launch = try await browser.request(entry.location!)
        guard launch.status == 302, let authorize = launch.location else { return (launch, nil) }
        let approved = try await browser.request(authorize)
        guard let callback = approved.location else { return (approved, nil) }
        return try await finishCallback(browser, callback)
    }

    /// Starts a standalone login at `loginPath`, picks `patient`, and returns the callback
    /// URL the sandbox redirects to (not yet followed).
    func approvedCallback(_ browser: Browser, loginPath: String = "/login", patient: String = "pat-1") async throws -> String? {
        let login = try await browser.request(baseURL + loginPath)
        guard let authorize = login.location else { return nil }
        let picker = try await browser.request(authorize)
        guard let range = picker.text.range(of: "/authorize/approve[^\"]*\(patient)", options: .regularExpression) else { return nil }
        return try await browser.request(sandbox.baseURL + picker.text[range].replacingOccurrences(of: "&amp;", with: "&")).location
    }

    func finishCallback(_ browser: Browser, _ callback: String) async throws -> (page: Browser.Page, launch: String?) {
        let done = try await browser.request(callback)
        return (done, Browser.launch(of: done))
    }
}
