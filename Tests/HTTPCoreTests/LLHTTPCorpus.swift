import Foundation
import Testing
@testable import HTTPCore

/// One request case of Node.js's llhttp test corpus (Fixtures/llhttp, MIT).
struct LLHTTPCase: Sendable, CustomTestStringConvertible {
    let title: String
    /// The bytes as the corpus has them (latin-1 decoded).
    let raw: [UInt8]
    /// llhttp's verdict.
    let accept: Bool
    /// Requests llhttp completes (before its error, for rejected cases).
    let messages: Int
    var testDescription: String { title }
}

/// Loading the corpus and running a case through `RequestParser`.
enum LLHTTPCorpus {
    static let cases: [LLHTTPCase] = {
        guard let url = Bundle.module.url(forResource: "requests", withExtension: "jsonl", subdirectory: "Fixtures/llhttp"),
              let text = try? String(contentsOf: url, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let title = object["title"] as? String, let raw = object["raw"] as? String,
                  let expect = object["expect"] as? String, let messages = object["messages"] as? Int else { return nil }
            // The JSON string holds one code point per byte (latin-1).
            let bytes = raw.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }
            return LLHTTPCase(title: title, raw: bytes, accept: expect == "accept", messages: messages)
        }
    }()

    static let crlf: [UInt8] = [13, 10]

    /// The parser's input for a case: `Host` added to each message head that has none (RFC 9112
    /// §3.2 requires it; llhttp does not), then `suffix` (by default the CRLF the corpus lost).
    static func input(_ c: LLHTTPCase, suffix: [UInt8] = crlf) -> [UInt8] {
        withHost(c.raw) + suffix
    }

    /// Inserts `Host:` after every request line whose head has no Host field. For an
    /// absolute-form target (`http://host[:port]…`) the value is that authority without any
    /// userinfo; otherwise `example.com`.
    static func withHost(_ raw: [UInt8]) -> [UInt8] {
        var lines = split(raw, separator: crlf)
        var k = 0
        while k < lines.count {
            guard let target = requestTarget(lines[k]) else { k += 1; continue }
            var end = k + 1
            var hasHost = false
            while end < lines.count, !lines[end].isEmpty {
                if lines[end].count >= 5, String(decoding: lines[end][0..<5], as: UTF8.self).lowercased() == "host:" { hasHost = true }
                end += 1
            }
            if !hasHost {
                lines.insert(Array("Host: \(host(of: target))".utf8), at: k + 1)
                end += 1
            }
            k = end
        }
        return Array(lines.joined(separator: crlf))
    }

    /// The target of `line` when it looks like a request line (`METHOD SP target SP PROTO/x.y`).
    static func requestTarget(_ line: [UInt8]) -> String? {
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty,
              parts[0].allSatisfy({ ByteClass.token.contains($0) }),
              let slash = parts[2].firstIndex(of: UInt8(ascii: "/")), slash > parts[2].startIndex,
              parts[2][..<slash].allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else { return nil }
        return String(decoding: parts[1], as: UTF8.self)
    }

    static func host(of target: String) -> String {
        guard target.lowercased().hasPrefix("http://") else { return "example.com" }
        let authority = target.dropFirst(7).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return String(authority.split(separator: "@", omittingEmptySubsequences: false).last ?? authority)
    }

    static func split(_ bytes: [UInt8], separator: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var start = 0
        var i = 0
        while i + separator.count <= bytes.count {
            if Array(bytes[i..<(i + separator.count)]) == separator {
                out.append(Array(bytes[start..<i]))
                i += separator.count
                start = i
            } else {
                i += 1
            }
        }
        out.append(Array(bytes[start...]))
        return out
    }

    /// Parses `bytes` as one connection's input: counts complete requests until a failure or
    /// until the parser needs more than there is.
    static func run(_ bytes: [UInt8], limits: HTTPLimits = HTTPLimits()) -> (messages: Int, failure: ParseError?) {
        var parser = RequestParser(limits: limits)
        var rest = bytes
        var messages = 0
        while true {
            switch parser.parse(rest) {
            case let .complete(_, consumed):
                messages += 1
                rest.removeFirst(consumed)
            case let .continueRequested(consumed):
                rest.removeFirst(consumed)
            case let .needMoreData(consumed):
                if consumed == 0 { return (messages, nil) }
                rest.removeFirst(consumed)
            case let .failed(error):
                return (messages, error)
            }
        }
    }
}

/// A request reduced to what the split tests compare.
struct ParsedSummary: Equatable, CustomStringConvertible {
    let method: String
    let target: String
    let version: HTTPVersion
    let headers: [String]
    let body: [UInt8]
    let keepAlive: Bool

    init(_ r: ParsedRequest) {
        method = r.method
        target = r.target
        version = r.version
        headers = r.headers.map { "\($0.name): \($0.value)" }
        body = r.body
        keepAlive = r.keepAlive
    }

    var description: String { "\(method) \(target) \(headers) body=\(body.count)B keepAlive=\(keepAlive)" }
}

/// What a connection would get from `pieces` arriving one after another: the requests, and the
/// refusal status if any. The buffer keeps what the parser has not consumed, as `Connection` does.
func feed(_ pieces: [[UInt8]], limits: HTTPLimits = HTTPLimits()) -> (requests: [ParsedSummary], refusal: Int?) {
    var parser = RequestParser(limits: limits)
    var buffer: [UInt8] = []
    var requests: [ParsedSummary] = []
    for piece in pieces {
        buffer += piece
        parsing: while !buffer.isEmpty {
            switch parser.parse(buffer) {
            case let .complete(request, consumed):
                requests.append(ParsedSummary(request))
                buffer.removeFirst(consumed)
            case let .continueRequested(consumed):
                buffer.removeFirst(consumed)
            case let .needMoreData(consumed):
                buffer.removeFirst(consumed)
                break parsing
            case let .failed(error):
                return (requests, error.status.code)
            }
        }
    }
    return (requests, nil)
}
