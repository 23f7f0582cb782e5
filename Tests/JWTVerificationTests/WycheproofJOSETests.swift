import Cryptography
import Foundation
import JSON
@testable import JWTVerification
import Testing

/// Wycheproof JWS and JWK cases through smart-bff's verifier. Under the ID-token policy a
/// case is accepted exactly when Wycheproof calls it valid, it is a compact JWS whose
/// payload is a JSON object, its `alg` is RS256, and its key is a usable RSA signing key
/// with e = 65537 and 2048–4096 bits. (Wycheproof's payloads are mostly not JSON, so most
/// valid cases are policy rejections; the second test checks their signatures directly.)
@Suite("Wycheproof JOSE vectors")
struct WycheproofJOSETests {
    struct Case: Sendable, CustomTestStringConvertible {
        let file: String
        let group: String
        let id: Int
        let comment: String
        let jws: String
        let keys: [UInt8] // a JWKS document
        let wycheproofValid: Bool
        var testDescription: String { "\(file) \(group) #\(id) \(comment)" }
    }

    static func load(_ name: String) -> [Case] {
        let url = Bundle.module.url(forResource: "Fixtures/wycheproof/" + name, withExtension: "json")!
        let json = try! JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
        var cases: [Case] = []
        for group in json["testGroups"] as! [[String: Any]] {
            let key = group["public"] ?? group["private"] ?? [:]
            var set = key as! [String: Any]
            if set["keys"] == nil { set = ["keys": [set]] }
            // Public parts only: drop private members of private keys.
            let keys = (set["keys"] as! [[String: Any]]).map { $0.filter { !["d", "p", "q", "dp", "dq", "qi", "k"].contains($0.key) || ($0.key == "k") } }
            let document = try! JSONSerialization.data(withJSONObject: ["keys": keys])
            for test in group["tests"] as! [[String: Any]] {
                let jws = (test["jws"] as? String) ?? ((try? JSONSerialization.data(withJSONObject: test["jws"]!)).map { String(decoding: $0, as: UTF8.self) } ?? "")
                cases.append(Case(file: name, group: group["comment"] as? String ?? "", id: test["tcId"] as! Int,
                                  comment: test["comment"] as? String ?? "", jws: jws, keys: Array(document),
                                  wycheproofValid: test["result"] as! String == "valid"))
            }
        }
        return cases
    }

    static let cases = load("json_web_signature_test") + load("json_web_key_test")

    static func verify(_ c: Case, payloadMustBeJSON: Bool = true) -> Bool {
        do {
            let jws = try CompactJWS(c.jws, payloadMustBeJSON: payloadMustBeJSON)
            let kid = try JWSVerifier.checkHeader(jws)
            let key = try JWKSet(json: c.keys).key(for: kid)
            try JWSVerifier.verifySignature(jws, key: key)
            return true
        } catch {
            return false
        }
    }

    /// The verdict the policy calls for, computed from the case's data alone.
    static func expected(_ c: Case, payloadMustBeJSON: Bool = true) -> Bool {
        let parts = c.jws.split(separator: ".", omittingEmptySubsequences: false)
        if payloadMustBeJSON {
            guard parts.count == 3, let payload = Data(base64Encoded: base64(String(parts[1]))),
                  (try? JSONSerialization.jsonObject(with: payload)) is [String: Any] else { return false }
        }
        guard c.wycheproofValid, !c.jws.hasPrefix("{"), let header = c.jws.split(separator: ".").first,
              let headerBytes = Data(base64Encoded: base64(String(header))),
              let headerJSON = try? JSONSerialization.jsonObject(with: headerBytes) as? [String: Any],
              headerJSON["alg"] as? String == "RS256" else { return false }
        let keys = ((try? JSONSerialization.jsonObject(with: Data(c.keys))) as? [String: Any])?["keys"] as? [[String: Any]] ?? []
        return keys.contains { k in
            guard k["kty"] as? String == "RSA", (k["alg"] as? String ?? "RS256") == "RS256", (k["use"] as? String ?? "sig") == "sig",
                  let n = k["n"] as? String, let e = k["e"] as? String, e == "AQAB", let modulus = Data(base64Encoded: base64(n)) else { return false }
            let bits = modulus.drop { $0 == 0 }.count * 8
            return bits >= 2048 && bits <= 4096
        }
    }

    static func base64(_ url: String) -> String {
        var s = url.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return s
    }

    @Test("every JWS and JWK case gets its verdict under the RS256-only policy", arguments: cases)
    func verdict(_ c: Case) {
        #expect(WycheproofJOSETests.verify(c) == WycheproofJOSETests.expected(c), "\(c.testDescription)")
        // The same case with a non-JSON payload allowed: the signature path alone.
        #expect(WycheproofJOSETests.verify(c, payloadMustBeJSON: false) == WycheproofJOSETests.expected(c, payloadMustBeJSON: false),
                "\(c.testDescription) (signature only)")
    }

    @Test("the vector files hold 401 + 26 cases, and some are accepted")
    func counts() {
        #expect(WycheproofJOSETests.cases.count == 427)
        #expect(WycheproofJOSETests.cases.filter { WycheproofJOSETests.verify($0, payloadMustBeJSON: false) }.count >= 8)
    }
}
