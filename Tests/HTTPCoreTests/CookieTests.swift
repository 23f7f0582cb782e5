@testable import HTTPCore
import Testing

/// `Request.cookie(_:)`: the session cookie is how browsers prove who they are, so a
/// look-alike name must never match and the value must come back exactly.
@Suite("cookies")
struct CookieTests {
    static func request(_ cookies: String...) -> Request {
        Request(method: "GET", target: "/", headers: HTTPHeaders(cookies.map { ("Cookie", $0) }))
    }

    @Test("finds a cookie among others, with or without spaces and tabs around pairs")
    func finds() {
        #expect(Self.request("a=1; bff_session=abc; c=3").cookie("bff_session") == "abc")
        #expect(Self.request("bff_session=abc").cookie("bff_session") == "abc")
        #expect(Self.request("a=1;bff_session=abc ;c=3").cookie("bff_session") == "abc")
        #expect(Self.request("a=1;\tbff_session=abc\t").cookie("bff_session") == "abc")
        #expect(Self.request("a=1", "bff_session=abc").cookie("bff_session") == "abc")
    }

    @Test("look-alike names do not match; the first exact pair wins")
    func exactName() {
        #expect(Self.request("xbff_session=evil; bff_session=good").cookie("bff_session") == "good")
        #expect(Self.request("bff_session_x=evil").cookie("bff_session") == nil)
        #expect(Self.request("bff_sessio=evil").cookie("bff_session") == nil)
        #expect(Self.request("BFF_SESSION=evil").cookie("bff_session") == nil)
        #expect(Self.request("bff_session=first; bff_session=second").cookie("bff_session") == "first")
    }

    @Test("empty, missing and malformed")
    func edges() {
        #expect(Self.request("bff_session=").cookie("bff_session") == "")
        #expect(Self.request("bff_session").cookie("bff_session") == nil)
        #expect(Self.request("").cookie("bff_session") == nil)
        #expect(Self.request(";;; ;").cookie("bff_session") == nil)
        #expect(Request(method: "GET", target: "/").cookie("bff_session") == nil)
        #expect(Self.request("a=b=c").cookie("a") == "b=c")
    }
}
