extension RequestParser {
    /// Applies RFC 9112's message rules to a parsed head and decides how the body is framed.
    func interpret(line: (method: String, target: String, version: HTTPVersion), headers: HTTPHeaders,
                   consumed: Int) -> HeadResult {
        if line.method == "CONNECT" { return .failure(ParseError(.notImplemented, "CONNECT is not supported")) }
        if line.method == "PRI" { return .failure(ParseError(.httpVersionNotSupported, "HTTP/2 is not supported")) }
        let framing = FramingFields(headers)

        // Host (RFC 9112 §3.2).
        if framing.hostCount > 1 { return .failure(.bad("more than one Host")) }
        if line.version == .http11, framing.hostCount == 0 { return .failure(.bad("missing Host")) }
        if let host = framing.host, !host.utf8.allSatisfy({ ByteClass.host[Int($0)] }) {
            return .failure(.bad("invalid Host"))
        }

        // Request target form (RFC 9112 §3.2).
        let target: String
        switch normalizeTarget(line.target, method: line.method, host: framing.host) {
        case let .success(t): target = t
        case let .failure(e): return .failure(e)
        }

        // Connection: `close` wins over `keep-alive` in any order (RFC 9112 §9.3). A list of
        // tokens, read by bytes: anything else is refused, as readers in front of this server
        // may take it for a close where this one would not, or the other way round.
        var close = false, keepAliveOption = false
        for value in framing.connection {
            for element in value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                let token = element.trimmingOWS()
                if token.isEmpty { continue } // empty list elements are allowed (RFC 9110 §5.6.1)
                guard token.allSatisfy({ ByteClass.token[Int($0)] }) else { return .failure(.bad("malformed Connection")) }
                if token.equalsIgnoringASCIICase("close") { close = true }
                if token.equalsIgnoringASCIICase("keep-alive") { keepAliveOption = true }
            }
        }
        // Upgrade (RFC 9110 §7.8): none is offered, and a server may ignore the field. The
        // request is answered over HTTP/1.1 (`curl --http2` to an http URL, asking for h2c,
        // gets its answer, not a 400), and it is the connection's last: a client may already
        // be sending in the protocol it asked for, and a proxy in front may take the
        // connection for a tunnel now; no byte after this request is read as a request.
        let keepAlive = !close && !framing.upgrade && (line.version == .http11 || keepAliveOption)

        // Expect. An HTTP/1.0 client must not be sent a 1xx response (RFC 9110 §15.2): its
        // 100-continue is ignored (§10.1.1).
        var expectsContinue = false
        if let expect = framing.expect {
            guard expect.equalsIgnoringASCIICase("100-continue") else {
                return .failure(ParseError(HTTPStatus(code: 417, reason: "Expectation Failed"), "unsupported expectation"))
            }
            expectsContinue = line.version == .http11
        }

        // Body framing (RFC 9112 §6).
        let codings = framing.transferEncoding
        let lengths = framing.contentLength
        var body: State = .head
        if !codings.isEmpty {
            if !lengths.isEmpty { return .failure(.bad("Content-Length with Transfer-Encoding")) }
            if line.version == .http10 { return .failure(.bad("Transfer-Encoding in HTTP/1.0")) }
            if let error = checkChunkedOnly(codings) { return .failure(error) }
            body = .chunkSize
        } else if !lengths.isEmpty {
            switch contentLength(lengths) {
            case let .failure(e): return .failure(e)
            case let .success(length):
                if length > limits.maxBodyBytes { return .failure(ParseError(.contentTooLarge, "body exceeds the limit")) }
                if length > 0 { body = .fixedBody(remaining: length) }
            }
        }
        if case .head = body { expectsContinue = false }

        let request = ParsedRequest(method: line.method, target: target, version: line.version,
                                    headers: headers, body: [], keepAlive: keepAlive)
        return .head(request, consumed: consumed, body: body, expectsContinue: expectsContinue)
    }

    /// Reduces the target to origin-form; absolute-form is accepted only for our own Host
    /// (the same host and port however spelled, or no Host, which only HTTP/1.0 may leave out). A fragment is never part of a
    /// target (RFC 9112 §3.2): a `#` is refused, where readers after this one might cut there.
    private func normalizeTarget(_ target: String, method: String, host: String?) -> Result<String, ParseError> {
        if target.utf8.contains(UInt8(ascii: "#")) { return .failure(.bad("fragment in request target")) }
        if target.hasPrefix("/") { return .success(target) }
        if target == "*" {
            return method == "OPTIONS" ? .success(target) : .failure(.bad("asterisk-form is only for OPTIONS"))
        }
        let lower = target.lowercased()
        let schemeLength: Int
        if lower.hasPrefix("http://") { schemeLength = 7 } else if lower.hasPrefix("https://") { schemeLength = 8 } else {
            return .failure(.bad("invalid request target"))
        }
        let afterScheme = target.dropFirst(schemeLength)
        let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" } ?? afterScheme.endIndex
        let authority = String(afterScheme[..<authorityEnd])
        guard !authority.isEmpty, !authority.contains("@"), authority.utf8.allSatisfy({ ByteClass.host[Int($0)] }) else {
            return .failure(.bad("invalid authority in request target"))
        }
        // The same host however spelled: case, and the scheme's default or an empty port.
        let defaultPort = schemeLength == 7 ? ":80" : ":443"
        func canonical(_ s: String) -> String {
            var s = s.lowercased()
            if s.hasSuffix(defaultPort) { s.removeLast(defaultPort.count) } else if s.hasSuffix(":") { s.removeLast() }
            return s
        }
        if let host, canonical(authority) != canonical(host) {
            return .failure(.bad("absolute-form target for another host"))
        }
        let rest = afterScheme[authorityEnd...]
        return .success(rest.hasPrefix("/") ? String(rest) : "/" + rest)
    }

    /// Only a single `chunked` is supported. A list that does not end in `chunked` leaves the
    /// body's length unknown: 400 (RFC 9112 §6.3, a MUST), as are malformed lists and
    /// `chunked` twice; other codings before a final `chunked` are 501 (§6.1).
    private func checkChunkedOnly(_ fields: [String]) -> ParseError? {
        var codings: [Substring] = []
        for field in fields {
            for element in field.split(separator: ",", omittingEmptySubsequences: false) {
                let coding = element.trimmingSpaces()
                guard !coding.isEmpty, coding.utf8.allSatisfy({ ByteClass.token[Int($0)] }) else {
                    return .bad("malformed Transfer-Encoding")
                }
                codings.append(coding)
            }
        }
        let isChunked = { (coding: Substring) in String(coding).equalsIgnoringASCIICase("chunked") }
        guard isChunked(codings[codings.count - 1]) else { return .bad("chunked is not the final transfer coding") }
        let others = codings.dropLast()
        if others.contains(where: isChunked) { return .bad("chunked applied more than once") }
        return others.isEmpty ? nil : ParseError(.notImplemented, "unsupported transfer coding")
    }

    /// Every Content-Length value must be the same run of digits.
    private func contentLength(_ fields: [String]) -> Result<Int, ParseError> {
        var length: Int?
        for field in fields {
            for element in field.split(separator: ",", omittingEmptySubsequences: false) {
                let text = element.trimmingSpaces()
                guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                      let value = Int(text) else { return .failure(.bad("malformed Content-Length")) }
                if let length, length != value { return .failure(.bad("differing Content-Length values")) }
                length = value
            }
        }
        return .success(length ?? 0)
    }
}

/// The header fields that decide how a message is framed, gathered in one pass.
struct FramingFields {
    /// The first Host field, and how many there are (one is the rule: no array per request).
    var host: String?
    var hostCount = 0
    var connection: [String] = []
    var transferEncoding: [String] = []
    var contentLength: [String] = []
    var expect: String?
    var upgrade = false

    init(_ headers: HTTPHeaders) {
        for (name, value) in headers {
            switch name.utf8.count {
            case 4 where name.equalsIgnoringASCIICase("Host"):
                host = host ?? value
                hostCount += 1
            case 6 where name.equalsIgnoringASCIICase("Expect"): expect = expect ?? value
            case 7 where name.equalsIgnoringASCIICase("Upgrade"): upgrade = true
            case 10 where name.equalsIgnoringASCIICase("Connection"): connection.append(value)
            case 14 where name.equalsIgnoringASCIICase("Content-Length"): contentLength.append(value)
            case 17 where name.equalsIgnoringASCIICase("Transfer-Encoding"): transferEncoding.append(value)
            default: break
            }
        }
    }
}
