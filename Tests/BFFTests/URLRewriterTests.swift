@testable import BFF
import Foundation
import HTTPCore
import Sessions
import Testing

/// Paging through the BFF depends on the EHR URLs of a Bundle's `link[].url` and
/// `entry[].fullUrl` (and absolute `reference`s) being rewritten, whatever chunk boundaries
/// the upstream body arrives in, and on nothing else changing.
@Suite("URL rewriting in proxied bodies")
struct URLRewriterTests {
    static let base = "https://ehr.example/fhir/r4"
    static let publicBase = "https://bff.example/fhir"

    /// The EHR's base spelt in several ways, marked in a JSON template: each marker's text in
    /// the body, and what the rewrite must leave in its place. `<R>`: the base, rewritten;
    /// `<K>`: the base, kept; `<E>`: with escaped slashes, rewritten to the BFF's URL escaped
    /// alike; `<U>`: scheme and host in upper case; `<P>`: with the default port.
    static let spellings: [(marker: String, body: String, rewritten: String)] = [
        ("<R>", base, publicBase), ("<K>", base, base),
        ("<E>", #"https:\/\/ehr.example\/fhir\/r4"#, #"https:\/\/bff.example\/fhir"#),
        ("<U>", "HTTPS://EHR.EXAMPLE/fhir/r4", publicBase), ("<P>", "https://ehr.example:443/fhir/r4", publicBase),
    ]

    /// A Bundle: its paging links, full URLs and a reference rewritten; the base elsewhere kept.
    static let template = #"{"resourceType":"Bundle","link":[{"relation":"next","url":"<R>/Observation?page=2"},"#
        + #"{"relation":"previous","url":"<E>\/Observation?page=0"}],"#
        + #""entry":[{"fullUrl":"<R>/Observation/1","resource":{"resourceType":"Observation","#
        + #""meta":{"profile":["<K>/StructureDefinition/vitals"]},"subject":{"reference" : "<R>/Patient/3"},"#
        + #""note":[{"text":"\"<K>/x and \"url\":\"<K>/y"}],"code":{"coding":[{"system":"<K>/CodeSystem/local","code":"a"}]}}},"#
        + #"{"fullUrl":"<R>/Observation/2","url":"<K>x/not-a-match"},{"fullUrl":"<P>/Observation/3","#
        + #""resource":{"subject":{"reference":"<U>/Patient/3"},"focus":{"reference":"<K>2/Patient/3"}}}],"#
        + #""another":"<K>/Patient/3","tail":"<K>/","xurl":"<K>/1"}"#

    /// `template` with the EHR's base in every marked place.
    static func body(_ template: String) -> String {
        spellings.reduce(template) { $0.replacingOccurrences(of: $1.marker, with: $1.body) }
    }

    /// `template` as the rewrite must leave it.
    static func expected(_ template: String) -> String {
        spellings.reduce(template) { $0.replacingOccurrences(of: $1.marker, with: $1.rewritten) }
    }

    static let body = body(template)
    static let expected = expected(template)

    static func rewrite(_ pieces: [[UInt8]]) -> String {
        var rewriter = URLRewriter(from: base, to: publicBase)
        var out: [UInt8] = []
        for piece in pieces { out += rewriter.rewrite(piece) }
        out += rewriter.finish()
        return String(decoding: out, as: UTF8.self)
    }

    static func rewrite(_ text: String) -> String { rewrite([Array(text.utf8)]) }

    @Test("whole, split at every offset, and byte by byte: the same result, only url, fullUrl and reference values rewritten, in any spelling")
    func everySplit() {
        let bytes = Array(Self.body.utf8)
        #expect(Self.expected.components(separatedBy: "bff.example").count == 8) // 7 rewritten
        #expect(Self.rewrite([bytes]) == Self.expected)
        for cut in 0...bytes.count {
            #expect(Self.rewrite([Array(bytes[..<cut]), Array(bytes[cut...])]) == Self.expected, "split at \(cut)")
        }
        #expect(Self.rewrite(bytes.map { [$0] }) == Self.expected)
    }

    @Test("a Patient's identifier system, profile, extension value, narrative and other strings under the EHR base stay, uncopied")
    func patientUnchanged() {
        let patient = Self.body(#"{"resourceType":"Patient","id":"3","meta":{"profile":["<K>/StructureDefinition/patient"]},"#
            + #""text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><a href=\"<K>/Patient/3\">MRN</a></div>"},"#
            + #""identifier":[{"system":"<K>/sid/mrn","value":"12345"}],"#
            + #""extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthPlace","valueUri":"<K>/Location/1"}],"#
            + #""managingOrganization":{"display":"<K>/Organization/1"}}"#)
        let bytes = Array(patient.utf8)
        let out = URLRewriter(from: Self.base, to: Self.publicBase).rewrite(whole: bytes)
        #expect(out == bytes && Self.sameBuffer(out, bytes))
        #expect(Self.rewrite(bytes.map { [$0] }) == patient)
    }

    @Test("a Bundle's link url, entry fullUrl and an absolute reference are rewritten, with any whitespace around the colon")
    func pagingMembers() {
        let template = "{\"link\":[{\"relation\":\"next\",\"url\":\"<R>/Observation?page=2\"}],\"entry\":[{\"fullUrl\" :\"<R>/Observation/1\","
            + "\"resource\":{\"subject\":{\n  \"reference\"\t:\r\n  \"<R>/Patient/3\"}}}]}"
        #expect(Self.rewrite(Self.body(template)) == Self.expected(template))
    }

    @Test("an extension's url under the EHR base is a url member and is rewritten; its value is not")
    func extensionURL() {
        let template = #"{"extension":[{"url":"<R>/StructureDefinition/x","valueUri":"<K>/y"}]}"#
        #expect(Self.rewrite(Self.body(template)) == Self.expected(template))
    }

    @Test("only the exact names: not a key holding an escaped quote, nor a longer, shorter or other-case one, nor an array element")
    func exactNames() {
        let template = #"{"a\"url":"<K>/1","Url":"<K>/2","urls":"<K>/3","fullurl":"<K>/4","references":"<K>/5","#
            + #""url":["<K>/6"],"reference":"<R>/7"}"#
        #expect(Self.rewrite(Self.body(template)) == Self.expected(template))
    }

    @Test("a member name split across chunks is found; one beyond the look-back bound is left alone")
    func nameAcrossChunks() {
        let template = #"{"resourceType":"Bundle","entry":[{"fullUrl":"<R>/Observation/1"}]}"#
        let text = Self.body(template), expected = Self.expected(template)
        for piece in [#"{"full"#, #"{"fullUrl""#, #"{"fullUrl":"#, #"{"fullUrl":""#] {
            let cut = text.range(of: piece)!.upperBound
            #expect(Self.rewrite([Array(text[..<cut].utf8), Array(text[cut...].utf8)]) == expected, "after \(piece)")
        }
        // `{"url":` and 57 bytes of whitespace fill the 64 bytes before the value's quote.
        let near = "{\"url\":" + String(repeating: " ", count: 57) + "\"<R>/1\"}"
        let far = "{\"url\":" + String(repeating: " ", count: 58) + "\"<K>/1\"}"
        for template in [near, far] {
            let bytes = Array(Self.body(template).utf8)
            #expect(Self.rewrite([bytes]) == Self.expected(template))
            #expect(Self.rewrite(bytes.map { [$0] }) == Self.expected(template))
        }
    }

    @Test("a body that ends in the middle of a would-be match keeps its bytes")
    func partialMatchAtTheEnd() {
        let text = #"{"url":"https://ehr.example/fhi"#
        #expect(Self.rewrite([Array(text.utf8)]) == text)
        #expect(URLRewriter(from: Self.base, to: Self.publicBase).rewrite(whole: Array(text.utf8)) == Array(text.utf8))
    }

    /// A `url` member's value as the EHR may spell it, and as the rewrite must leave it.
    static let otherSpellings: [(String, String)] = [
        (#"https:\/\/ehr.example\/fhir\/r4\/Observation?page=2"#, #"https:\/\/bff.example\/fhir\/Observation?page=2"#),
        (#"https:\/\/ehr.example/fhir\/r4/Observation"#, #"https:\/\/bff.example\/fhir\/Observation"#), // escaped if any slash was
        ("HTTPS://EHR.EXAMPLE/fhir/r4/Patient/1", "https://bff.example/fhir/Patient/1"),
        ("hTTps://Ehr.ExAmple/fhir/r4/Patient/1", "https://bff.example/fhir/Patient/1"),
        ("https://ehr.example:443/fhir/r4/Patient/1", "https://bff.example/fhir/Patient/1"),
        (#"HTTPS:\/\/EHR.example:443\/fhir\/r4\/Patient\/1"#, #"https:\/\/bff.example\/fhir\/Patient\/1"#),
    ]

    /// `url` values that are not under the EHR's base, however they look.
    static let notTheBase = [
        "https://ehr.example/FHIR/r4/Patient/1", "https://ehr.example/fhir/R4/Patient/1", // the path is case-sensitive
        "https://ehr.example:8443/fhir/r4/Patient/1", "https://ehr.example:80/fhir/r4/Patient/1", "https://ehr.example:4430/fhir/r4/x",
        "http://ehr.example/fhir/r4/Patient/1", "https://ehr.example.evil/fhir/r4/Patient/1",
        "https://ehr.example@evil.example/fhir/r4/Patient/1", "https://ehr.example:443.evil/fhir/r4/Patient/1",
        "https://ehr.example/fhir/r42/Patient/1", "https://ehr.example/fhir/r4x", "https://ehr.example/fhir/r4",
        "https://ehr.example/fhir/r4x?_getpages=1", "https://ehr.example/fhir?_getpages=1", "https://ehr.example/fhir/r4#?_getpages=1",
        #"https:\/\/ehr.example\/fhir\/r4x\/Patient"#, #"https:\\/\\/ehr.example\\/fhir\\/r4\\/Patient"#,
        #"https:\u002F\u002Fehr.example\u002Ffhir\u002Fr4\u002FPatient"#, // other escapes are not matched
    ]

    @Test("the base's other spellings are rewritten (escaped slashes escaped in the result too, scheme and host in any case, :443), however split")
    func spellingsRewritten() {
        for (url, rewritten) in Self.otherSpellings {
            let bytes = Array(#"{"url":"\#(url)"}"#.utf8), expected = #"{"url":"\#(rewritten)"}"#
            for cut in 0...bytes.count {
                #expect(Self.rewrite([Array(bytes[..<cut]), Array(bytes[cut...])]) == expected, "\(url) split at \(cut)")
            }
            #expect(Self.rewrite(bytes.map { [$0] }) == expected, "\(url)")
        }
    }

    @Test("URLs that only look like the base are not rewritten: other path case, port, scheme or host, other escapes")
    func notTheBase() {
        for url in Self.notTheBase {
            let bytes = Array(#"{"url":"\#(url)"}"#.utf8)
            let out = URLRewriter(from: Self.base, to: Self.publicBase).rewrite(whole: bytes)
            #expect(out == bytes && Self.sameBuffer(out, bytes), "\(url)")
            #expect(Self.rewrite(bytes.map { [$0] }) == #"{"url":"\#(url)"}"#, "\(url)")
        }
    }

    @Test("bases with ports, upper case or a trailing slash: the same origin rules")
    func bases() {
        let cases: [(base: String, url: String, rewritten: Bool)] = [
            ("http://127.0.0.1:8080/fhir", "http://127.0.0.1:8080/fhir/Patient/1", true),
            ("http://127.0.0.1:8080/fhir", "http://127.0.0.1/fhir/Patient/1", false),
            ("http://127.0.0.1:8080/fhir", "http://127.0.0.1:80/fhir/Patient/1", false),
            ("http://localhost/fhir", "HTTP://LOCALHOST:80/fhir/Patient/1", true),
            ("http://localhost/fhir", "http://localhost:443/fhir/Patient/1", false),
            ("HTTPS://EHR.Example:443/fhir/r4/", "https://ehr.example/fhir/r4/Patient/1", true),
            ("http://[::1]:8080/fhir", "http://[::1]:8080/fhir/Patient/1", true),
            ("http://[::1]:8080/fhir", "http://[::1]/fhir/Patient/1", false),
            ("https://ehr.example", "https://EHR.example:443/Patient/1", true),
        ]
        for (base, url, rewritten) in cases {
            let body = Array(#"{"url":"\#(url)"}"#.utf8)
            let out = String(decoding: URLRewriter(from: base, to: Self.publicBase).rewrite(whole: body), as: UTF8.self)
            #expect(out == #"{"url":"\#(rewritten ? Self.publicBase + "/Patient/1" : url)"}"#, "\(url) under \(base)")
        }
    }

    @Test("a whole body is rewritten like a stream, and one rewriter serves many bodies")
    func wholeBodies() {
        let rewriter = URLRewriter(from: Self.base, to: Self.publicBase)
        for _ in 0..<2 {
            #expect(String(decoding: rewriter.rewrite(whole: Array(Self.body.utf8)), as: UTF8.self) == Self.expected)
        }
        #expect(rewriter.rewrite(whole: Array(#"{"id":"1"}"#.utf8)) == Array(#"{"id":"1"}"#.utf8))
    }

    /// Whether `a` and `b` share one buffer: the rewriter handed its input back, not a copy.
    static func sameBuffer(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { y in x.baseAddress == y.baseAddress } }
    }

    @Test("a chunk or whole body without a match comes back as the same buffer, not a copy")
    func noCopyWithoutMatch() {
        let chunks = [#"{"resourceType":"Bundle","link":[{"relation":"self","url":"https://elsewhere.example/fhir/r4/x"}],"#,
                      #""entry":[{"resource":{"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]}}}]}"#]
        var rewriter = URLRewriter(from: Self.base, to: Self.publicBase)
        for chunk in chunks.map({ Array($0.utf8) }) {
            let out = rewriter.rewrite(chunk)
            #expect(out == chunk && Self.sameBuffer(out, chunk))
        }
        #expect(rewriter.finish().isEmpty)
        let whole = Array(chunks.joined().utf8)
        let out = URLRewriter(from: Self.base, to: Self.publicBase).rewrite(whole: whole)
        #expect(out == whole && Self.sameBuffer(out, whole))
    }

    @Test("a Location header is rewritten under the EHR base, and no other URL is")
    func location() {
        let rewriter = URLRewriter(from: Self.base, to: Self.publicBase)
        #expect(rewriter.rewritten(url: Self.base + "/Patient/1/_history/2") == Self.publicBase + "/Patient/1/_history/2")
        #expect(rewriter.rewritten(url: Self.base + "?_getpages=1") == nil)
        #expect(rewriter.rewritten(url: "https://elsewhere.example/x") == nil)
        #expect(rewriter.rewritten(url: Self.base + "x/Patient/1") == nil)
        #expect(rewriter.rewritten(url: "/fhir/r4/Patient/1") == nil)
        // The same origin rules as in bodies; JSON's escapes are not a header's.
        #expect(rewriter.rewritten(url: "HTTPS://EHR.Example:443/fhir/r4/Patient/1/_history/2") == Self.publicBase + "/Patient/1/_history/2")
        for url in ["https://ehr.example/FHIR/r4/Patient/1", "https://ehr.example:8443/fhir/r4/Patient/1", #"https:\/\/ehr.example\/fhir\/r4\/Patient\/1"#] {
            #expect(rewriter.rewritten(url: url) == nil)
        }
    }

    /// Paths a browser resolves to a place outside the base, and paths that only look alike.
    static let dotSegments = ["../session", "Patient/../../session", "./Patient/1", "Patient/%2e%2e/%2E%2e/session", "Patient/.%2E/x",
                              #"Patient\..\..\session"#, "..", "Patient/..?x=1", "Patient/..#f",
                              // A browser drops tabs and newlines from a URL first: these are `..` to it.
                              ".\t./session", "Patient/%2\te%2e/x", "Patient/.\n./x", "Patient/.\r./x"]
    static let notDotSegments = ["Patient/a..b", "Patient/.../x", "Patient/1?x=../y", "Patient/1#../y", "Patient/%2e1", "..x/y"]

    @Test("a URL under the base whose path climbs out of it (dot segments, also percent-encoded or between backslashes) is not rewritten, in a Location or a body")
    func dotSegmentsKept() {
        let rewriter = URLRewriter(from: Self.base, to: Self.publicBase)
        for rest in Self.dotSegments {
            #expect(rewriter.rewritten(url: Self.base + "/" + rest) == nil, "\(rest)")
            let json = rest.replacingOccurrences(of: "\\", with: "\\\\")
            let body = #"{"link":[{"url":"\#(Self.base)/\#(json)"}],"ok":{"reference":"\#(Self.base)/Patient/1"}}"#
            let expected = #"{"link":[{"url":"\#(Self.base)/\#(json)"}],"ok":{"reference":"\#(Self.publicBase)/Patient/1"}}"#
            let bytes = Array(body.utf8)
            #expect(Self.rewrite(body) == expected, "\(rest)")
            for cut in 0...bytes.count {
                #expect(Self.rewrite([Array(bytes[..<cut]), Array(bytes[cut...])]) == expected, "\(rest) split at \(cut)")
            }
        }
        for rest in Self.notDotSegments {
            #expect(rewriter.rewritten(url: Self.base + "/" + rest) == Self.publicBase + "/" + rest, "\(rest)")
            #expect(Self.rewrite(#"{"url":"\#(Self.base)/\#(rest)"}"#) == #"{"url":"\#(Self.publicBase)/\#(rest)"}"#, "\(rest)")
        }
        // In JSON, escaped slashes separate segments too, and a \u escape is not read (kept: the safe side).
        for kept in [#"{"url":"https:\/\/ehr.example\/fhir\/r4\/..\/session"}"#, #"{"url":"https://ehr.example/fhir/r4/\u002e\u002e/session"}"#,
                     #"{"url":"https://ehr.example/fhir/r4/.\t./session"}"#, #"{"url":"https://ehr.example/fhir/r4/.\n./session"}"#,
                     #"{"url":"https://ehr.example/fhir/r4/.%2\re/session"}"#] {
            #expect(Self.rewrite(kept) == kept)
        }
        // A string still open after more bytes than any URL held back is left as it came.
        let long = Array(#"{"url":"\#(Self.base)/Binary/\#(String(repeating: "a", count: URLRewriter.maxHeldString + 100))"}"#.utf8)
        let cut = URLRewriter.maxHeldString + 50
        #expect(Self.rewrite([Array(long[..<cut]), Array(long[cut...])]) == String(decoding: long, as: UTF8.self))
    }

    static let pages = PageBinding(derivedKeys: [PageBinding.derivedKey(Array(repeating: 1, count: 32))], launchHash: "launch-a")

    /// A `url` value that is a HAPI paging link, and what the rewrite must leave: the BFF's
    /// `/fhir?` and the id with this launch's tag.
    static let pagingLinks: [(String, String)] = [
        ("https://ehr.example/fhir/r4?_getpages=5f1c-9a&_getpagesoffset=20&_count=20",
         "https://bff.example/fhir?_getpages=\(tag("5f1c-9a")).5f1c-9a&_getpagesoffset=20&_count=20"),
        ("HTTPS://ehr.example:443/fhir/r4?_getpages=5f1c", "https://bff.example/fhir?_getpages=\(tag("5f1c")).5f1c"),
        (#"https:\/\/ehr.example\/fhir\/r4?_getpages=a.b_c"#, #"https:\/\/bff.example\/fhir?_getpages="# + tag("a.b_c") + ".a.b_c"),
    ]

    static func tag(_ id: String) -> String { String(decoding: pages.tag(for: Array(id.utf8)), as: UTF8.self) }

    @Test("HAPI FHIR's paging links on the base: the BFF's /fhir? and the search id tagged for the launch, however split")
    func pagingLinks() {
        for (url, rewritten) in Self.pagingLinks {
            let bytes = Array(#"{"url":"\#(url)"}"#.utf8), expected = #"{"url":"\#(rewritten)"}"#
            for cut in 0...bytes.count {
                var rewriter = URLRewriter(from: Self.base, to: Self.publicBase, pages: Self.pages)
                let out = rewriter.rewrite(Array(bytes[..<cut])) + rewriter.rewrite(Array(bytes[cut...])) + rewriter.finish()
                #expect(String(decoding: out, as: UTF8.self) == expected, "\(url) split at \(cut)")
            }
            // Without a binding such links stay the EHR's.
            #expect(URLRewriter(from: Self.base, to: Self.publicBase).rewrite(whole: bytes) == bytes)
        }
        // Another launch's tag differs; the tag covers the id.
        let other = PageBinding(derivedKeys: [PageBinding.derivedKey(Array(repeating: 1, count: 32))], launchHash: "launch-b")
        #expect(other.tag(for: Array("5f1c".utf8)) != Self.pages.tag(for: Array("5f1c".utf8)))
        #expect(Self.pages.tag(for: Array("5f1d".utf8)) != Self.pages.tag(for: Array("5f1c".utf8)))
        // Other queries on the base, and ids the binding does not take, stay the EHR's.
        for url in ["https://ehr.example/fhir/r4?_type=Patient", "https://ehr.example/fhir/r4?_count=5&_getpages=1",
                    "https://ehr.example/fhir/r4?_getpages=", "https://ehr.example/fhir/r4?_getpages=a%2Fb", "https://ehr.example/fhir/r4?_getpages=a b",
                    "https://ehr.example/fhir/r4?_getpages=" + String(repeating: "a", count: PageBinding.maxIDLength + 1)] {
            let bytes = Array(#"{"url":"\#(url)"}"#.utf8)
            var rewriter = URLRewriter(from: Self.base, to: Self.publicBase, pages: Self.pages)
            let out = bytes.map { rewriter.rewrite([$0]) }.joined() + rewriter.finish()
            #expect(Array(out) == bytes, "\(url)")
        }
    }

    @Test("random bodies cut into random pieces: the same output as whole, for every kind of match and near-miss")
    func randomPieces() {
        // Fragments that begin, complete or nearly complete each kind of match, and filler.
        let quote = "\"", escapedQuote = "\\\""
        let pieces: [String] = [#"{"url":"#, #""fullUrl": "#, #","reference" :"#, #""system":"#, quote, "}", ",", " ", "\\", escapedQuote,
                                Self.base, Self.base + "/", Self.base + "?", "?_getpages=", "_getpages=", "5f1c", "&", "x",
                                #"https:\/\/ehr.example\/fhir\/r4"#, "https://ehr.example:443/fhir/r4", "HTTPS://EHR.EXAMPLE/fhir/r4",
                                "https://ehr.example/fhir/r4x", "/Patient/1", String(repeating: " ", count: 70)]
        let values: [String] = [Self.base + "/Patient/1", Self.base + "?_getpages=5f1c&_count=2", Self.base + "?_getpages=5f1c",
                                Self.base + "?_type=x", #"https:\/\/ehr.example\/fhir\/r4\/Observation"#, "HTTPS://EHR.EXAMPLE/fhir/r4/x",
                                Self.base + "?_getpages=a%2F"]
        let members: [String] = [#"{"url":""#, #""fullUrl": ""#, #","reference":""#]
        var fragments = pieces
        for value in values { for member in members { fragments.append(member + value + quote) } }
        var random = SplitMix64(seed: 0x5eed_2026_1126)
        var rewrites = 0
        for round in 0..<3_000 {
            var body: [UInt8] = []
            for _ in 0..<Int(random.next() % 24) { body += Array(fragments[Int(random.next() % UInt64(fragments.count))].utf8) }
            let whole = URLRewriter(from: Self.base, to: Self.publicBase, pages: Self.pages).rewrite(whole: body)
            if whole != body { rewrites += 1 }
            var rewriter = URLRewriter(from: Self.base, to: Self.publicBase, pages: Self.pages)
            var out: [UInt8] = [], at = 0
            while at < body.count {
                let next = min(body.count, at + 1 + Int(random.next() % 40))
                out += rewriter.rewrite(Array(body[at..<next]))
                at = next
            }
            out += rewriter.finish()
            #expect(String(decoding: out, as: UTF8.self) == String(decoding: whole, as: UTF8.self), "round \(round): \(String(decoding: body, as: UTF8.self))")
            if out != whole { return }
        }
        #expect(rewrites > 300, "the bodies exercise matches: \(rewrites) of 3000 were rewritten")
    }

    @Test("a page request's bound id: this launch's tag gives the EHR's id; another launch's, an altered or a missing tag, nothing")
    func boundIDs() throws {
        let value = Self.tag("5f1c") + ".5f1c"
        #expect(Self.pages.id(fromBound: value[...]) == "5f1c")
        let other = PageBinding(derivedKeys: [PageBinding.derivedKey(Array(repeating: 1, count: 32))], launchHash: "launch-b")
        #expect(other.id(fromBound: value[...]) == nil)
        let otherKey = PageBinding(derivedKeys: [PageBinding.derivedKey(Array(repeating: 2, count: 32))], launchHash: "launch-a")
        #expect(otherKey.id(fromBound: value[...]) == nil)
        for altered in [Self.tag("5f1c") + ".5f1d", (value.first == "B" ? "C" : "B") + value.dropFirst(), "5f1c", "." + value, Self.tag("5f1c") + "."] {
            #expect(Self.pages.id(fromBound: altered[...]) == nil, "\(altered)")
        }
        #expect(try FHIRProxy.upstreamQuery(path: "", query: "_getpages=\(value)&_getpagesoffset=20&_count=10", pages: Self.pages)
            == "_getpages=5f1c&_getpagesoffset=20&_count=10")
        #expect(throws: HTTPError.self) { try FHIRProxy.upstreamQuery(path: "", query: "_getpages=\(value)", pages: other) }
        // A key rotation: tags are made under the new key; those made under the old one still check.
        let old = PageBinding.derivedKey(Array(repeating: 1, count: 32)), new = PageBinding.derivedKey(Array(repeating: 3, count: 32))
        let rotated = PageBinding(derivedKeys: [new, old], launchHash: "launch-a")
        #expect(rotated.id(fromBound: value[...]) == "5f1c")
        #expect(rotated.tag(for: Array("5f1c".utf8)) == PageBinding(derivedKeys: [new], launchHash: "launch-a").tag(for: Array("5f1c".utf8)))
        #expect(PageBinding(derivedKeys: [new], launchHash: "launch-a").id(fromBound: value[...]) == nil)
    }

    @Test("JSON bodies (any case, with parameters) are rewritten; others pass untouched")
    func whichBodies() {
        #expect(FHIRProxy.isJSON("application/fhir+json; charset=utf-8"))
        #expect(FHIRProxy.isJSON("APPLICATION/JSON"))
        #expect(!FHIRProxy.isJSON("application/fhir+xml"))
        #expect(!FHIRProxy.isJSON("text/html"))
        #expect(!FHIRProxy.isJSON(""))
        #expect(FHIRProxy.isJSON("application/jjson")) // a partial match restarts
        #expect(!FHIRProxy.isJSON("application/jso n"))
        #expect(FHIRProxy.isJSON("application/x-JsOn"))
    }
}

/// `/fhir/{path}` is checked byte by byte before anything goes upstream.
@Suite("FHIR path checks")
struct FHIRPathTests {
    @Test("accepted paths, and the resource type each reads")
    func accepted() {
        for path in ["Patient", "Patient/123", "Observation/a.b-c_d", "Patient/1/_history/2", "$export", "Patient/..."] {
            #expect(FHIRPath.problem(path: path, query: nil) == nil, "\(path)")
        }
        // A page of search results at the base itself, as HAPI FHIR's paging links read it.
        let id = "TAG-OF-22-CHARACTERS_x.5f1c" // a tag's form; whose it is, the proxy checks
        for query in ["_getpages=\(id)", "_getpages=\(id)&_getpagesoffset=20&_count=20&_bundletype=searchset",
                      "_getpages=\(id)&_pageId=2&_format=json&_pretty=true&_include=Observation:subject:Patient&_elements=id,code",
                      "_getpages=\(id)&_include:iterate=Patient:link:Patient&_include=Patient:organization:Organization&_elements:exclude=text"] {
            #expect(FHIRPath.problem(path: "", query: query) == nil, "\(query)")
        }
    }

    @Test("each path's FHIR interaction, and what it asks of the scopes: results not of one type need a wildcard scope")
    func interaction() {
        let cases: [(String, FHIRInteraction, FHIRInteraction.Access)] = [
            ("metadata", .capabilities, .open),
            ("Observation", .searchType(type: "Observation"), .resources(type: "Observation", interaction: .search)),
            ("Observation/_history", .historyType(type: "Observation"), .resources(type: "Observation", interaction: .history)),
            ("Observation/1", .read(type: "Observation"), .resources(type: "Observation", interaction: .read)),
            ("Observation/a.b-c", .read(type: "Observation"), .resources(type: "Observation", interaction: .read)),
            ("Observation/1/_history", .historyInstance(type: "Observation"), .resources(type: "Observation", interaction: .read)),
            ("Observation/1/_history/2", .vread(type: "Observation"), .resources(type: "Observation", interaction: .read)),
            // A compartment search returns the compartment's resources of the last type.
            ("Patient/1/Observation", .searchType(type: "Observation"), .resources(type: "Observation", interaction: .search)),
            ("Patient/1/MedicationRequest", .searchType(type: "MedicationRequest"), .resources(type: "MedicationRequest", interaction: .search)),
        ]
        for (path, interaction, access) in cases {
            #expect(FHIRInteraction(path: path) == interaction && FHIRInteraction(path: path).access == access, "\(path)")
        }
        let anyType = FHIRInteraction.Access.resources(type: "*", interaction: .search)
        for path in ["$export", "Patient/$everything", "Patient/1/$everything", "Group/1/$export"] {
            #expect(FHIRInteraction(path: path) == .operation && FHIRInteraction(path: path).access == .resources(type: "*", interaction: .operation),
                    "\(path)")
        }
        let wide: [(String, FHIRInteraction)] = [
            ("metadata/x", .other), ("well-known", .other), ("Patient/1/Observation/2", .other), ("Patient/1/_history/2/x", .other),
            ("Patient/1/x", .other), ("Patient/a_b", .other), ("Patient/1/Observation/2/_history", .other),
        ]
        for (path, interaction) in wide {
            #expect(FHIRInteraction(path: path) == interaction && FHIRInteraction(path: path).access == anyType, "\(path)")
        }
        #expect(FHIRInteraction(path: "") == .page && FHIRInteraction(path: "").access == .someSearch)
        #expect(FHIRInteraction(path: "_history") == .historySystem
            && FHIRInteraction(path: "_history").access == .resources(type: "*", interaction: .history))
    }

    @Test("the audit export names each read's RESTful interaction by its path, whatever its query")
    func exportedInteraction() {
        let cases = ["/Patient/1": "read", "/Patient/1?_elements=name": "read", "/Observation?patient=1": "search-type",
                     "/Patient/1/Observation": "search-type", "/metadata": "capabilities", "/Patient/1/$everything": "operation",
                     "/$export": "operation", "/_history": "history-system", "/Patient/_history": "history-type",
                     "/Patient/1/_history": "history-instance", "/Patient/1/_history/2": "vread", "/Patient/1/x": "search-system",
                     "/?_getpages=5f1c&_getpagesoffset=20": "search"]
        for (path, code) in cases {
            let entry = AuditEntry(at: Date(), launchHash: "l", iss: "https://ehr.example/fhir", sub: "s", fhirUser: nil, patient: nil,
                                   method: "GET", pathAndQuery: path, upstreamStatus: 200, bytes: 1)
            #expect(AuditEventExport.auditEvent(entry)["subtype"]?.arrayValue?.first?["code"]?.stringValue == code, "\(path)")
        }
    }

    @Test("refused paths, each with its reason")
    func refused() {
        let cases: [(String, String)] = [
            ("", "A FHIR path is required: at the EHR's base only a page of search results (?_getpages=…) is read."),
            ("Patient//1", "Empty path segments (//) are not allowed."),
            ("Patient/", "Empty path segments (//) are not allowed."),
            ("/Patient", "Empty path segments (//) are not allowed."),
            ("Patient/./1", "Dot segments are not allowed."),
            ("Patient/..", "Dot segments are not allowed."),
            ("../Patient", "Dot segments are not allowed."),
            ("Patient/%2e%2e", "The path holds characters a FHIR path does not."),
            ("Patient/a@b", "The path holds characters a FHIR path does not."),
            ("Patient/a\\b", "The path holds characters a FHIR path does not."),
            ("Patient/\u{e9}", "The path holds characters a FHIR path does not."),
            ("//evil.example/x", "Empty path segments (//) are not allowed."),
        ]
        for (path, reason) in cases {
            #expect(FHIRPath.problem(path: path, query: nil) == reason, "\(path)")
        }
        // At the base, a query that is not a page: a system search, a page with a search's own
        // parameters, or no page id.
        // At the base, a query that is not a page as the BFF writes its links: a system search,
        // a page with a search's own parameters, no page id, one not bound, bound ids or other
        // parameters twice, percent-encoded names.
        let id = "TAG-OF-22-CHARACTERS_x.5f1c"
        for query in ["_type=Observation", "_getpages=\(id)&patient=2", "_getpages=", "_getpages", "_getpagesoffset=20&_count=20",
                      "_getpages=5f1c", "_getpages=TAG-OF-22-CHARACTERS_x5f1c", "_getpages=TAG-OF-22-CHARACTERS_x.", "_getpages=TAG-OF-22-CHARACTERS_x.a%2Fb",
                      "_getpages=\(id)&_getpages=\(id)", "_getpages=&_getpages=\(id)", "_getpages=\(id)&_count=10&_count=0",
                      "%5Fgetpages=\(id)", "_getpages=\(id)&_include%3Aiterate=Patient:link:Patient", "_getpages=+", "_getpages=%20",
                      // No `;`, which some servers split on, and no escaped separators.
                      "_getpages=\(id)&_count=1;_getpages=victim", "_getpages=\(id)&_format=a%26_getpages%3Dvictim", "_getpages=\(id)&_count=1%3b"] {
            #expect(FHIRPath.problem(path: "", query: query)?.hasPrefix("A FHIR path is required") == true, "\(query)")
        }
        #expect(FHIRPath.problem(path: "", query: "_getpages=\(id)&_count=1#x") == "The query holds a #.")
        // Elsewhere no page parameter at all: HAPI pages whatever the path, and the id would not be checked.
        for (path, query) in [("Patient", "_getpages=5f1c"), ("$x", "_getpages=5f1c&_getpagesoffset=20"), ("_search", "_getpages=\(id)"),
                              ("Patient", "name=a&%5Fgetpages=5f1c"), ("Observation", "_pageId=2"), ("Patient", "_getpages")] {
            #expect(FHIRPath.problem(path: path, query: query)?.hasPrefix("A page of search results is read at /fhir?_getpages") == true,
                    "\(path)?\(query)")
        }
        #expect(FHIRPath.problem(path: "Patient", query: "_getpagesoffset=20&name=_getpages") == nil)
    }
}

/// A small seeded generator (SplitMix64): the same sequence on every run, so a failure repeats.
struct SplitMix64 {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
