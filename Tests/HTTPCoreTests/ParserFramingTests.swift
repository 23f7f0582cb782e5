@testable import HTTPCore
import Testing

/// Body framing (RFC 9112 §6): what request smuggling relies on is refused, not guessed at.
@Suite("parser: Content-Length and Transfer-Encoding")
struct ParserFramingTests {
    static let head = "POST / HTTP/1.1\r\nHost: a\r\n"

    @Test("Content-Length together with Transfer-Encoding is 400")
    func contentLengthWithTransferEncoding() {
        #expect(Wire.refusal(Self.head + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n") == 400)
    }

    @Test("differing Content-Length values are 400, in two fields or in one list")
    func differingContentLengths() {
        #expect(Wire.refusal(Self.head + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd") == 400)
        #expect(Wire.refusal(Self.head + "Content-Length: 3, 4\r\n\r\nabcd") == 400)
    }

    @Test("identical repeated Content-Length values and leading zeros are one length")
    func identicalContentLengths() {
        #expect(Wire.request(Self.head + "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc")?.body == Wire.bytes("abc"))
        #expect(Wire.request(Self.head + "Content-Length: 003\r\n\r\nabc")?.body == Wire.bytes("abc"))
    }

    @Test("Content-Length: +5 is 400")
    func contentLengthPlus() { #expect(Wire.refusal(Self.head + "Content-Length: +5\r\n\r\nabcde") == 400) }

    @Test("Content-Length: -1 is 400")
    func contentLengthNegative() { #expect(Wire.refusal(Self.head + "Content-Length: -1\r\n\r\n") == 400) }

    @Test("Content-Length: 0x5 is 400")
    func contentLengthHex() { #expect(Wire.refusal(Self.head + "Content-Length: 0x5\r\n\r\nabcde") == 400) }

    @Test("Content-Length: 1 2 is 400")
    func contentLengthSpaced() { #expect(Wire.refusal(Self.head + "Content-Length: 1 2\r\n\r\nabcdefghijkl") == 400) }

    @Test("an empty or huge Content-Length is 400")
    func contentLengthEmptyOrHuge() {
        #expect(Wire.refusal(Self.head + "Content-Length:\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Content-Length: 99999999999999999999999\r\n\r\n") == 400)
    }

    @Test("Transfer-Encoding: xchunked is 400: chunked is not the final coding, so the length is unknown")
    func transferEncodingXChunked() { #expect(Wire.refusal(Self.head + "Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n") == 400) }

    @Test("Transfer-Encoding: chunked, chunked is 400, in one field or two")
    func transferEncodingChunkedTwice() {
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n") == 400)
    }

    @Test("Transfer-Encoding with a vertical tab before or after chunked is 400")
    func transferEncodingVerticalTab() {
        #expect(Wire.refusal(Self.head + "Transfer-Encoding:\u{0B}chunked\r\n\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\u{0B}\r\n\r\n0\r\n\r\n") == 400)
    }

    @Test("Transfer-Encoding split by whitespace, quoted, or with an empty element is 400")
    func transferEncodingMalformed() {
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunk ed\r\n\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: \"chunked\"\r\n\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked,\r\n\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding:\r\n\r\n") == 400)
    }

    @Test("a Transfer-Encoding name with whitespace before the colon or folded under another field is 400")
    func transferEncodingNameTricks() {
        #expect(Wire.refusal(Self.head + "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "X: 1\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n") == 400)
    }

    @Test("spaces and tabs around chunked are optional whitespace: the body is still read as chunked")
    func transferEncodingOptionalWhitespace() {
        for value in ["chunked ", "\tchunked", "chunked\t ", "  CHUNKED"] {
            let request = Wire.request(Self.head + "Transfer-Encoding:\(value)\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
            #expect(request?.body == Wire.bytes("abc"), "value \(value.debugDescription)")
        }
    }

    @Test("codings that do not end in chunked are 400 (RFC 9112 §6.3: the length is unknown); other codings before a final chunked are 501")
    func transferEncodingOtherCodings() {
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: gzip\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: identity\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n") == 501)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n") == 501)
    }

    @Test("Transfer-Encoding in HTTP/1.0 is 400")
    func transferEncodingHTTP10() {
        #expect(Wire.refusal("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n") == 400)
    }

    @Test("a chunk size of more than 15 hex digits is 400, not an overflow")
    func chunkSizeOverflow() {
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\n\r\n10000000000000001\r\nx\r\n") == 400)
    }

    @Test("leading zeros in a chunk size are allowed (1*HEXDIG) and do not count toward its 15 digits")
    func chunkSizeLeadingZeros() {
        let body = Wire.request(Self.head + "Transfer-Encoding: chunked\r\n\r\n00000000000000003\r\nabc\r\n000\r\n\r\n")?.body
        #expect(body == Array("abc".utf8))
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\n\r\n0010000000000000001\r\nx\r\n") == 400)
    }

    @Test("chunk data not followed by CRLF is 400")
    func chunkDataWithoutCRLF() {
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n") == 400)
    }

    @Test("a chunk size line with a bare LF, a space, or a missing size is 400")
    func chunkSizeLineMalformed() {
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\n\r\n;x\r\nabc\r\n0\r\n\r\n") == 400)
    }

    @Test("trailer fields are parsed and ignored: not added to the headers")
    func trailersIgnored() throws {
        let request = try #require(Wire.request(Self.head + "Transfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Checksum: 42\r\nExpires: never\r\n\r\n"))
        #expect(request.body == Wire.bytes("hi"))
        #expect(request.headers == ["Host: a", "Transfer-Encoding: chunked"])
    }

    @Test("a malformed trailer field is 400")
    func trailerMalformed() {
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\n\r\n0\r\nX-Bad\r\n\r\n") == 400)
        #expect(Wire.refusal(Self.head + "Transfer-Encoding: chunked\r\n\r\n0\r\n folded: x\r\n\r\n") == 400)
    }
}
