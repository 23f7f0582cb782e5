import Cryptography
import JSON
@testable import JWTVerification
import Testing

/// Strict parsing of the compact serialization: size, parts, base64url and JSON.
@Suite("ID token: strict encoding")
struct EncodingTests {
    let f = IDTokenFixture()

    @Test("duplicate members in the header are refused")
    func duplicateHeaderMembers() async throws {
        let header = Array(#"{"alg":"RS256","kid":"k1","kid":"k1"}"#.utf8)
        await f.expectRejected(try f.rawToken(header: header, payload: f.claims().bytes), .malformed)
        let algTwice = Array(#"{"alg":"none","kid":"k1","alg":"RS256"}"#.utf8)
        await f.expectRejected(try f.rawToken(header: algTwice, payload: f.claims().bytes), .malformed)
    }

    @Test("duplicate members in the payload are refused")
    func duplicatePayloadMembers() async throws {
        let text = f.claims().serialized().dropLast() + #","sub":"admin"}"#
        await f.expectRejected(try f.rawToken(header: Array(#"{"alg":"RS256","kid":"k1"}"#.utf8), payload: Array(text.utf8)), .malformed)
        // Control: the same construction without the duplicate is accepted.
        let clean = f.claims().serialized()
        _ = try await f.validate(try f.rawToken(header: Array(#"{"alg":"RS256","kid":"k1"}"#.utf8), payload: Array(clean.utf8)))
    }

    @Test("padding in any part is refused")
    func padding() async throws {
        let parts = try f.token().split(separator: ".").map(String.init)
        for i in 0..<3 {
            var padded = parts
            padded[i] += "="
            await f.expectRejected(padded.joined(separator: "."), .malformed)
        }
    }

    @Test("the standard alphabet (+ and /) and whitespace are refused")
    func alphabet() async throws {
        let token = try f.token()
        let parts = token.split(separator: ".").map(String.init)
        let standard = parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        if standard != parts[2] { await f.expectRejected(parts[0] + "." + parts[1] + "." + standard, .malformed) }
        await f.expectRejected(parts[0] + "." + parts[1] + "." + "+" + parts[2].dropFirst(), .malformed)
        await f.expectRejected(parts[0] + ". " + parts[1] + "." + parts[2], .malformed)
        await f.expectRejected(token + "\n", .malformed)
    }

    @Test("non-canonical trailing bits are refused (same bytes, another text)")
    func nonCanonicalTrailingBits() async throws {
        // A signature of 256 bytes encodes to 342 characters, whose last carries 4 unused bits.
        let parts = try f.token().split(separator: ".").map(String.init)
        #expect(parts[2].utf8.count % 4 == 2)
        var sig = Array(parts[2].utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        let i = alphabet.firstIndex(of: sig[sig.count - 1])!
        sig[sig.count - 1] = alphabet[i ^ 1]
        let altered = String(decoding: sig, as: UTF8.self)
        #expect(Base64URL.decode(altered) == nil)
        await f.expectRejected(parts[0] + "." + parts[1] + "." + altered, .malformed)
    }

    @Test("a token over 16 KiB is refused before its key is fetched")
    func oversized() async throws {
        let big = try f.token(claims: f.claims([("pad", .string(String(repeating: "x", count: 17_000)))]))
        #expect(big.utf8.count > CompactJWS.maxLength)
        await f.expectRejected(big, .malformed)
        #expect(f.endpoint.count == 0)
        // Just under the limit is fine: each padding character adds 4/3 of a character.
        let base = try f.token(claims: f.claims([("pad", "")])).utf8.count
        let under = try f.token(claims: f.claims([("pad", .string(String(repeating: "x", count: (CompactJWS.maxLength - base) * 3 / 4 - 2)))]))
        #expect(under.utf8.count <= CompactJWS.maxLength && under.utf8.count > CompactJWS.maxLength - 8)
        _ = try await f.validate(under)
    }

    @Test("not exactly three parts is refused", arguments: [1, 2, 4, 5])
    func partCount(_ count: Int) async throws {
        let parts = try f.token().split(separator: ".").map(String.init)
        let token = (0..<count).map { parts[min($0, 2)] }.joined(separator: ".")
        await f.expectRejected(token, .malformed)
    }

    @Test("a header or payload that is not a JSON object is refused")
    func notObjects() async throws {
        await f.expectRejected(try f.rawToken(header: Array(#"["RS256"]"#.utf8), payload: f.claims().bytes), .malformed)
        await f.expectRejected(try f.rawToken(header: Array(#"{"alg":"RS256","kid":"k1"}"#.utf8), payload: Array("\"sub\"".utf8)), .malformed)
        await f.expectRejected(try f.rawToken(header: Array(#"{"alg":"RS256","kid":"k1"}"#.utf8), payload: Array("{\"sub\":".utf8)), .malformed)
    }
}
