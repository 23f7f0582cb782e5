@testable import HTTPCore
import Testing

/// What goes on the wire for a response head: no handler-supplied value can split the
/// response, and framing fields come only from the server.
@Suite("response heads")
struct ResponseHeadTests {
    static func head(_ response: Response, framing: ResponseHead.Framing = .length(0)) -> String {
        var out: [UInt8] = []
        ResponseHead.write(response, version: .http11, framing: framing, keepAlive: true, date: Array("D".utf8), into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test("CR, LF and NUL in a value become spaces")
    func valuesCannotSplit() {
        var response = Response(status: .ok)
        response.headers.add("X-A", "1\r\nSet-Cookie: evil=1\u{0}")
        #expect(Self.head(response) == "HTTP/1.1 200 OK\r\nX-A: 1  Set-Cookie: evil=1 \r\nDate: D\r\nContent-Length: 0\r\n\r\n")
    }

    @Test("framing fields set by a handler are dropped, in any case; others of the same length stay")
    func framingFromTheServerOnly() {
        var response = Response(status: .ok)
        for name in ["content-length", "Transfer-Encoding", "CONNECTION", "date", "Keep-Alive"] { response.headers.add(name, "x") }
        for name in ["Content-Type", "X-Frame-Opts", "ETag"] { response.headers.add(name, "kept") }
        #expect(Self.head(response, framing: .chunked)
                    == "HTTP/1.1 200 OK\r\nContent-Type: kept\r\nX-Frame-Opts: kept\r\nETag: kept\r\nDate: D\r\nTransfer-Encoding: chunked\r\n\r\n")
    }
}
