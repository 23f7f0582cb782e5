@testable import BFF
import HTTPCore
import Testing

/// The sign-in's browser binding: what `/callback` accepts as proof that the browser began the
/// sign-in, and what it records so that the browser's other sign-ins find it.
@Suite("login cookie bindings")
struct LoginCookieTests {
    static let session = SessionCookie(secure: false, sameSiteNone: false)
    static let (oldKey, newKey) = (LoginCookie.derivedKey(Array(repeating: 1, count: 32)), LoginCookie.derivedKey(Array(repeating: 2, count: 32)))

    static func request(_ cookie: String) -> Request {
        Request(method: "GET", target: "/callback", headers: HTTPHeaders([("Cookie", cookie)]))
    }

    /// The pair `Set-Cookie` would leave in the browser.
    static func cookiePair(_ setCookie: String) -> String { String(setCookie.split(separator: ";")[0]) }

    @Test("a binding made under a key this instance only checks (a rotation rolling out) is accepted and recorded as the browser holds it, not recomputed")
    func fallbackKeyBinding() {
        let before = LoginCookie(session: Self.session, lifetime: 600, keys: [Self.oldKey])
        let after = LoginCookie(session: Self.session, lifetime: 600, keys: [Self.newKey, Self.oldKey])
        let request = Self.request(Self.cookiePair(before.set("state-1")))
        #expect(after.binding(of: "state-1", in: request) == before.binding(for: "state-1"))
        #expect(after.binding(of: "state-1", in: request) != after.binding(for: "state-1"))
        #expect(after.binding(of: "state-2", in: request) == nil)
        let unknown = LoginCookie(session: Self.session, lifetime: 600, keys: [LoginCookie.derivedKey(Array(repeating: 3, count: 32))])
        #expect(unknown.binding(of: "state-1", in: request) == nil, "a binding under no key of ours")
    }

    @Test("a cookie holding the state itself (the previous release's) still proves the browser, but is never another sign-in's binding")
    func legacyStateCookie() {
        let cookie = LoginCookie(session: Self.session, lifetime: 600, keys: [Self.newKey])
        let state = String(repeating: "s", count: 43)
        let legacy = Self.request(cookie.name(for: state) + "=" + state)
        #expect(cookie.binding(of: state, in: legacy) == state)
        #expect(cookie.otherBindings(in: legacy, besides: "another-state").isEmpty)
        let current = Self.request(Self.cookiePair(cookie.set(state)))
        #expect(cookie.otherBindings(in: current, besides: "another-state") == [cookie.binding(for: state)])
    }
}
