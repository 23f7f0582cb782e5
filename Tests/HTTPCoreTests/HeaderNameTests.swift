import HTTPCore
import Testing

/// Field names compare case-insensitively in ASCII only: a handler asking for
/// `X-CSRF` must find `x-csrf`, and nothing else may pass for it.
@Suite("header names")
struct HeaderNameTests {
    @Test("equal apart from ASCII letter case")
    func equal() {
        #expect("Content-Type".equalsIgnoringASCIICase("content-type"))
        #expect("X-CSRF".equalsIgnoringASCIICase("x-Csrf"))
        #expect("".equalsIgnoringASCIICase(""))
        // Longer than a small string's 15 bytes: compared in the strings' heap storage.
        #expect("Content-Security-Policy".equalsIgnoringASCIICase("content-security-POLICY"))
    }

    @Test("different names, lengths, and bytes that differ only in bit 5 without being letters")
    func different() {
        #expect(!"X-CSRF".equalsIgnoringASCIICase("X-CSRFX"))
        #expect(!"ETag".equalsIgnoringASCIICase("ETah"))
        #expect(!"A@".equalsIgnoringASCIICase("A`")) // 0x40 vs 0x60
        #expect(!"X[".equalsIgnoringASCIICase("X{")) // 0x5B vs 0x7B
        #expect(!"a-b".equalsIgnoringASCIICase("a\rb")) // 0x2D vs 0x0D
        #expect(!"Ä".equalsIgnoringASCIICase("ä")) // not ASCII: bytes compared as they are
        #expect(!"Content-Security-Policy".equalsIgnoringASCIICase("Content-Security-Polic`"))
        #expect(!"Strict-Transport-Security".equalsIgnoringASCIICase("Strict-Transport-Securit"))
    }

    @Test("header lookups use it")
    func lookups() {
        var headers = HTTPHeaders([("Set-Cookie", "a"), ("set-cookie", "b"), ("Accept", "x")])
        #expect(headers["SET-COOKIE"] == "a")
        #expect(headers.values(for: "Set-cookie") == ["a", "b"])
        headers.remove("SET-cookie")
        #expect(headers.count == 1 && headers["accept"] == "x")
    }
}
