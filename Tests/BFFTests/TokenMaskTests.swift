@testable import BFF
import Testing

@Suite("access tokens masked in what the EHR answers")
struct TokenMaskTests {
    static let token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
    static let stars = String(repeating: "*", count: token.utf8.count)

    @Test("every occurrence in a whole body and in a field value becomes stars, one for one; other bytes stay")
    func whole() {
        let mask = TokenMask(token: Self.token)
        let body = #"{"diagnostics":"Bearer \#(Self.token) rejected","url":"x?access_token=\#(Self.token)&a=\#(Self.token)"}"#
        let masked = String(decoding: mask.masked(whole: Array(body.utf8)), as: UTF8.self)
        #expect(masked == #"{"diagnostics":"Bearer \#(Self.stars) rejected","url":"x?access_token=\#(Self.stars)&a=\#(Self.stars)"}"#)
        #expect(mask.masked("W/\"\(Self.token)\"") == "W/\"\(Self.stars)\"")
        #expect(mask.masked("no token here") == "no token here")
        // A token's beginning alone is no token.
        let partial = "Bearer " + Self.token.dropLast()
        #expect(mask.masked(whole: Array(partial.utf8)) == Array(partial.utf8))
    }

    @Test("a body in pieces: masked as the whole is, wherever the pieces break, the bytes held back given up at the end")
    func pieces() {
        let body = Array(("Bearer \(Self.token)\(Self.token) e" + Self.token.prefix(9) + " and at the end " + Self.token).utf8)
        let expected = TokenMask(token: Self.token).masked(whole: body)
        #expect(expected != body && expected.count == body.count)
        for first in 0...body.count {
            for second in stride(from: first, through: body.count, by: 7) {
                var mask = TokenMask(token: Self.token)
                var out: [UInt8] = []
                for piece in [body[..<first], body[first..<second], body[second...]] { out += mask.masked(Array(piece)) }
                out += mask.finish()
                #expect(out == expected, "pieces break at \(first), \(second)")
            }
        }
        // A body that ends in the token's beginning gets those bytes at the end.
        var mask = TokenMask(token: Self.token)
        let cut = Array(("ends in " + Self.token.prefix(20)).utf8)
        #expect(mask.masked(cut) + mask.finish() == cut)
    }

    @Test("a base64 token with / is masked as written and as JSON escapes it (\\/), whole and in pieces")
    func escapedSlash() {
        let token = "ab/cdEFgh+ij/klMNop=="
        let body = Array(#"{"a":"\#(token)","b":"ab\/cdEFgh+ij\/klMNop=="}"#.utf8)
        let expected = Array(#"{"a":"*********************","b":"***********************"}"#.utf8)
        #expect(TokenMask(token: token).masked(whole: body) == expected)
        for cut in 0...body.count {
            var mask = TokenMask(token: token)
            #expect(mask.masked(Array(body[..<cut])) + mask.masked(Array(body[cut...])) + mask.finish() == expected, "split at \(cut)")
        }
    }

    @Test("a base64 token is masked as URLs carry it too: percent-encoded in either hex case, with or without its slashes, whole and in pieces")
    func percentEncoded() {
        let token = "AT0001+ab/cd+ef/gh==QQQ"
        for written in ["AT0001%2Bab%2Fcd%2Bef%2Fgh%3D%3DQQQ", "AT0001%2bab%2fcd%2bef%2fgh%3d%3dQQQ", "AT0001%2Bab/cd%2Bef/gh%3D%3DQQQ",
                        #"AT0001%2bab\/cd%2bef\/gh%3d%3dQQQ"#] {
            let body = Array("{\"next\":\"https://ehr.example/fhir/Patient?access_token=\(written)&x=1\"}".utf8)
            let expected = Array("{\"next\":\"https://ehr.example/fhir/Patient?access_token=\(String(repeating: "*", count: written.utf8.count))&x=1\"}".utf8)
            #expect(TokenMask(token: token).masked(whole: body) == expected, "\(written)")
            #expect(TokenMask(token: token).masked("access_token=" + written) == "access_token=" + String(repeating: "*", count: written.utf8.count))
            for cut in 0...body.count {
                var mask = TokenMask(token: token)
                #expect(mask.masked(Array(body[..<cut])) + mask.masked(Array(body[cut...])) + mask.finish() == expected, "\(written) split at \(cut)")
            }
        }
        #expect(TokenMask.otherSpellings(of: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln-_~").isEmpty, "a base64url token has one spelling")
    }

    @Test("a token shorter than 16 bytes masks nothing: it would mask ordinary text")
    func short() {
        var mask = TokenMask(token: "abc")
        #expect(mask.masked(whole: Array("abcabc".utf8)) == Array("abcabc".utf8))
        #expect(mask.masked(Array("abc".utf8)) == Array("abc".utf8) && mask.finish().isEmpty)
    }
}
