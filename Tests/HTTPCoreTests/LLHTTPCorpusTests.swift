@testable import HTTPCore
import Testing

/// Every request case of llhttp's corpus through our parser. Input: the raw bytes, `Host`
/// added where missing, then the CRLF the corpus lost. Accepted: no refusal and at least as
/// many complete requests as llhttp; refused: the parser fails.
@Suite("llhttp request corpus")
struct LLHTTPCorpusTests {
    /// Where smart-bff deliberately decides otherwise than llhttp, and why. The opposite of
    /// llhttp's verdict is asserted for each, so an entry that stops being a difference fails.
    static let deliberateDifferences: [String: String] = [
        // Refused by us, accepted by llhttp:
        "SOURCE request with ICE": "only HTTP/1.0 and HTTP/1.1 are served: ICE/1.0 is refused (400)",
        "OPTIONS request with RTSP": "only HTTP/1.0 and HTTP/1.1 are served: RTSP/1.0 is refused (400)",
        "ANNOUNCE request with RTSP": "only HTTP/1.0 and HTTP/1.1 are served: RTSP/1.0 is refused (400)",
        "No HTTP version": "HTTP/0.9 request lines (`GET /` without a version) are refused (400)",
        "M-SEARCH request": "asterisk-form is only for OPTIONS (RFC 9112 §3.2.4)",
        "POST with `chunked` as last transfer-encoding": "only a lone `chunked` coding is supported: `deflate, chunked` is 501",
        "POST with `chunked` as last transfer-encoding (multiple headers)": "only a lone `chunked` coding is supported: `deflate` + `chunked` is 501",
        "`host:port` and basic auth": "absolute-form with userinfo (`http://a%12:b!&*$@…`) is refused (400)",
        "Fragment in URI": "a fragment is never part of a request target (RFC 9112 §3.2): a `#` is refused (400), where a "
            + "reader behind this one might cut the target there",
        // Accepted by us, refused by llhttp:
        "Invalid method": "MKCOLA is a valid method token (RFC 9110 §9); routing answers it (404/405)",
        "HTTP protocol and ANNOUNCE method": "ANNOUNCE is a valid method token with HTTP/1.0; routing answers it",
        "Setting a flag and pausing": "Upgrade is ignored (RFC 9110 §7.8): the request is answered over HTTP/1.1 as the "
            + "connection's last, where llhttp pauses to hand the connection over (with bytes after it, both refuse them)",
    ]

    /// Cases that lost more (or other) than one final CRLF when the corpus was converted: the
    /// suffix that restores the message llhttp's test had. Each entry is asserted to be needed.
    static let repairs: [String: (suffix: String, reason: String)] = [
        "Error on `Content-Length` overflow":
            ("\r\n\r\n", "the raw bytes end inside the Content-Length field: both its CRLF and the empty line are lost"),
        "Error on duplicate `Content-Length`":
            ("\r\n\r\n", "the raw bytes end inside the second Content-Length field: both CRLFs are lost"),
        "Should parse multiple events":
            ("", "the last body (Content-Length: 5, `CCCC`) lacks its final byte: an added CRLF would become it plus a stray LF"),
    ]

    static func input(_ c: LLHTTPCase) -> [UInt8] {
        LLHTTPCorpus.input(c, suffix: repairs[c.title].map { Array($0.suffix.utf8) } ?? LLHTTPCorpus.crlf)
    }

    /// Our verdict: accepted (true) or refused (false); nil for "neither" (too few requests).
    static func verdict(_ c: LLHTTPCase, input: [UInt8], minimumMessages: Int) -> Bool? {
        let (messages, failure) = LLHTTPCorpus.run(input)
        if failure != nil { return false }
        return messages >= minimumMessages ? true : nil
    }

    @Test("the fixture holds llhttp's 120 request cases (55 accept, 65 reject)")
    func corpusLoaded() {
        #expect(LLHTTPCorpus.cases.count == 120)
        #expect(LLHTTPCorpus.cases.filter(\.accept).count == 55)
    }

    @Test("each case gets llhttp's verdict", arguments: LLHTTPCorpus.cases.filter { deliberateDifferences[$0.title] == nil })
    func sameVerdict(_ c: LLHTTPCase) {
        let input = Self.input(c)
        let (messages, failure) = LLHTTPCorpus.run(input)
        if c.accept {
            #expect(failure == nil, "refused: \(failure.map(String.init(describing:)) ?? "")")
            #expect(messages >= c.messages, "only \(messages) of \(c.messages) requests completed")
        } else {
            #expect(failure != nil, "accepted (\(messages) requests)")
        }
    }

    @Test("deliberate differences: the opposite of llhttp's verdict", arguments: LLHTTPCorpus.cases.filter { deliberateDifferences[$0.title] != nil })
    func oppositeVerdict(_ c: LLHTTPCase) {
        let reason = Self.deliberateDifferences[c.title] ?? ""
        let (messages, failure) = LLHTTPCorpus.run(Self.input(c))
        if c.accept {
            #expect(failure != nil, "accepted, yet listed as refused: \(reason)")
        } else {
            #expect(failure == nil, "refused (\(failure.map(String.init(describing:)) ?? "")), yet listed as accepted: \(reason)")
            #expect(messages >= max(1, c.messages), "the request did not complete: \(reason)")
        }
    }

    @Test("every table entry names a case of the corpus")
    func tablesNameRealCases() {
        let titles = Set(LLHTTPCorpus.cases.map(\.title))
        for title in Self.deliberateDifferences.keys { #expect(titles.contains(title), "no case \(title)") }
        for title in Self.repairs.keys { #expect(titles.contains(title), "no case \(title)") }
    }

    @Test("each repair is needed: with the plain CRLF the case gets the other verdict, repaired llhttp's",
          arguments: LLHTTPCorpus.cases.filter { repairs[$0.title] != nil })
    func repairNeeded(_ c: LLHTTPCase) {
        let plain = Self.verdict(c, input: LLHTTPCorpus.input(c), minimumMessages: c.messages)
        let repaired = Self.verdict(c, input: Self.input(c), minimumMessages: c.messages)
        #expect(plain != c.accept, "the repair is not needed")
        #expect(repaired == c.accept)
    }

    @Test("absolute-form targets are reduced to origin-form", arguments: [
        ("Host terminated by a query string", "/?hail=all"),
        ("`host:port` terminated by a query string", "/?hail=all"),
        ("`host:port` terminated by a space", "/"),
    ])
    func absoluteFormReduced(_ title: String, _ target: String) throws {
        let c = try #require(LLHTTPCorpus.cases.first { $0.title == title })
        #expect(feed([LLHTTPCorpus.input(c)]).requests.first?.target == target)
    }
}
