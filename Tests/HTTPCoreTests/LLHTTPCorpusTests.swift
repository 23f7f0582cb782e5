import Foundation
@testable import HTTPCore
import Testing

/// Every request of the llhttp corpus, through our parser. The corpus lost the final CRLF
/// of many messages when it was converted, so one is appended; `Host` is added where
/// missing, since RFC 9112 §3.2 requires it and llhttp does not.
@Suite("llhttp request corpus")
struct LLHTTPCorpusTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let title: String
        let raw: [UInt8]
        let accept: Bool
        let messages: Int
        var testDescription: String { title }
    }

    /// Where smart-bff deliberately decides otherwise than llhttp, and why. Each verdict is
    /// asserted (the opposite of llhttp's), so this table cannot go stale.
    static let deliberateDifferences: [String: String] = [
        "ICE protocol, but not really": "",
        "SOURCE request with ICE": "only HTTP/1.0 and HTTP/1.1 are served (ICE/1.0 refused)",
        "OPTIONS request with RTSP": "only HTTP/1.0 and HTTP/1.1 are served (RTSP/1.0 refused)",
        "ANNOUNCE request with RTSP": "only HTTP/1.0 and HTTP/1.1 are served (RTSP/1.0 refused)",
        "No HTTP version": "HTTP/0.9 request lines are refused",
        "M-SEARCH request": "asterisk-form is only for OPTIONS (RFC 9112 §3.2.4)",
        "POST with `chunked` as last transfer-encoding": "only a lone `chunked` coding is supported (501)",
        "POST with `chunked` as last transfer-encoding (multiple headers)": "only a lone `chunked` coding is supported (501)",
        "`host:port` and basic auth": "absolute-form with userinfo is refused",
        "Invalid method": "MKCOLA is a valid method token (RFC 9110 §9); routing answers it",
        "HTTP protocol and ANNOUNCE method": "ANNOUNCE is a valid method token; routing answers it",
    ].filter { !$0.value.isEmpty }

    static let cases: [Case] = {
        let url = Bundle.module.url(forResource: "Fixtures/llhttp/requests", withExtension: "jsonl")!
        let text = try! String(contentsOf: url, encoding: .utf8)
        return text.split(separator: "\n").map { line in
            let object = try! JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            let raw = (object["raw"] as! String).unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }
            return Case(title: object["title"] as! String, raw: withHost(raw), accept: object["expect"] as! String == "accept",
                        messages: object["messages"] as! Int)
        }
    }()

    /// Inserts `Host:` after every request line whose message has none.
    static func withHost(_ raw: [UInt8]) -> [UInt8] {
        let text = String(raw.map { Character(Unicode.Scalar($0)) })
        let requestLine = /(?m)^[A-Za-z-]+ (\S+) [A-Z]+\/\d\.\d\r\n/
        var out = ""
        var rest = Substring(text)
        while let match = rest.firstMatch(of: requestLine) {
            out += rest[..<match.range.upperBound]
            rest = rest[match.range.upperBound...]
            let head = rest.prefix { _ in true }.components(separatedBy: "\r\n\r\n").first ?? ""
            if !head.lowercased().contains("host:") && !head.lowercased().hasPrefix("host:") {
                var host = "example.com"
                let target = String(match.output.1)
                if target.hasPrefix("http://") { host = String(target.dropFirst(7).prefix { $0 != "/" && $0 != "?" }) }
                out += "Host: \(host)\r\n"
            }
        }
        out += rest
        return out.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }
    }

    /// Parses all of `bytes`: (complete messages, refused).
    static func run(_ bytes: [UInt8]) -> (messages: Int, refused: Bool) {
        var parser = RequestParser()
        var rest = bytes[...]
        var messages = 0
        while true {
            switch parser.parse(Array(rest)) {
            case let .complete(_, consumed): messages += 1; rest = rest.dropFirst(consumed)
            case let .continueRequested(consumed): rest = rest.dropFirst(consumed)
            case let .needMoreData(consumed):
                if consumed == 0 { return (messages, false) }
                rest = rest.dropFirst(consumed)
            case .failed: return (messages, true)
            }
        }
    }

    @Test("each case gets llhttp's verdict, or the documented opposite", arguments: cases)
    func verdict(_ c: Case) {
        // The corpus lost final CRLFs: a case is accepted when the raw bytes, or the raw bytes
        // with the lost CRLF, parse to enough messages; refused when the completed head is.
        let runs = [c.raw, c.raw + [13, 10], c.raw + [13, 10, 13, 10]].map(LLHTTPCorpusTests.run)
        let accepted = runs[0...1].contains { !$0.refused && $0.messages >= c.messages }
        let refused = runs[1].refused || runs[2].refused
        let expectAccept = LLHTTPCorpusTests.deliberateDifferences[c.title] == nil ? c.accept : !c.accept
        if expectAccept {
            #expect(accepted, "refused or too few messages: \(c.title)")
        } else {
            #expect(refused, "accepted: \(c.title)")
        }
    }

    @Test("the corpus has its 120 cases") func count() { #expect(LLHTTPCorpusTests.cases.count == 120) }

    @Test("split at every byte offset, and fed byte by byte, parses the same as whole", arguments: cases.filter(\.accept))
    func split(_ c: Case) {
        let whole = LLHTTPCorpusTests.collect([c.raw])
        for offset in 1..<c.raw.count {
            #expect(LLHTTPCorpusTests.collect([Array(c.raw[..<offset]), Array(c.raw[offset...])]) == whole, "offset \(offset)")
        }
        #expect(LLHTTPCorpusTests.collect(c.raw.map { [$0] }) == whole)
    }

    /// Feeds pieces as a connection would: appending to a buffer and dropping what was consumed.
    static func collect(_ pieces: [[UInt8]]) -> [String] {
        var parser = RequestParser()
        var buffer: [UInt8] = []
        var out: [String] = []
        for piece in pieces {
            buffer += piece
            loop: while !buffer.isEmpty {
                switch parser.parse(buffer) {
                case let .complete(r, consumed):
                    out.append("\(r.method) \(r.target) \(r.headers.map { "\($0.name)=\($0.value)" }) \(r.body) \(r.keepAlive)")
                    buffer.removeFirst(consumed)
                case let .continueRequested(consumed): buffer.removeFirst(consumed)
                case let .needMoreData(consumed):
                    buffer.removeFirst(consumed)
                    break loop
                case let .failed(e): out.append("error \(e.status.code)"); return out
                }
            }
        }
        return out
    }
}
