import CLinux

/// Masks the launch's access token in what the EHR answers, before a front end sees it.
///
/// The contract's invariant is that tokens never reach a front end, yet some servers echo a
/// request's credentials: an OperationOutcome's diagnostics quoting the `Authorization`
/// field, a stack trace, a URL with `access_token=` in a `Location` or a Binary. Every
/// occurrence of the token's bytes is overwritten with `*`, one for one: lengths stay as
/// declared, and JSON stays JSON. A token with `/`, `+` or `=` (base64, not base64url) is
/// also masked as JSON writers escape it (`\/` for each `/`) and as URLs carry it
/// (percent-encoded, in either hex case, with or without its `/`s: query encoders differ).
///
/// Across chunks: bytes at a chunk's end that begin the token are held back until the next
/// chunk shows whether the rest follows; `finish()` gives them up at the end. A chunk or a
/// value that holds no token and ends in no beginning of one goes on as it is, uncopied:
/// the usual read costs a search, and no allocation.
struct TokenMask {
    /// Shorter tokens are not masked: a token of a few bytes would mask ordinary text.
    /// No EHR issues one (they carry 128 bits or more, 22+ characters in base64url).
    static let minimumLength = 16

    /// The token as written (searched in place); nil when it is too short to mask.
    private let token: String?
    /// The token's other spellings (JSON's, URLs'); none for a base64url token, which all
    /// of them write as it is (and then nothing is allocated).
    private let others: [[UInt8]]
    /// The longest spelling's length.
    private let longest: Int
    private var held: [UInt8] = []

    /// A mask for `token`; one that masks nothing when the token is shorter than `minimumLength`.
    init(token: String) {
        let count = token.utf8.count
        guard count >= TokenMask.minimumLength else { (self.token, others, longest) = (nil, [], 0); return }
        self.token = token
        others = TokenMask.otherSpellings(of: token)
        longest = others.reduce(count) { max($0, $1.count) }
    }

    /// How JSON and URLs may write `token`, but as it is: JSON's `\/` for `/`; in a URL each
    /// byte outside RFC 3986's unreserved set percent-encoded (upper- or lower-case hex), or
    /// each but `/` (and then maybe JSON-escaped too).
    static func otherSpellings(of token: String) -> [[UInt8]] {
        func unreserved(_ b: UInt8) -> Bool {
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E
        }
        guard !token.utf8.allSatisfy(unreserved) else { return [] } // every read: no allocation
        let raw = Array(token.utf8)
        func percentEncoded(hex: String, keepingSlashes: Bool) -> [UInt8] {
            raw.flatMap { b -> [UInt8] in
                unreserved(b) || (keepingSlashes && b == UInt8(ascii: "/")) ? [b] : [UInt8(ascii: "%")] + Array(String(format: hex, b).utf8)
            }
        }
        func jsonEscaped(_ s: [UInt8]) -> [UInt8] { s.flatMap { $0 == UInt8(ascii: "/") ? [UInt8(ascii: "\\"), $0] : [$0] } }
        var spellings: [[UInt8]] = []
        for spelling in [raw] + ["%02X", "%02x"].flatMap({ hex in [true, false].map { percentEncoded(hex: hex, keepingSlashes: $0) } }) {
            for variant in [spelling, jsonEscaped(spelling)] where variant != raw && !spellings.contains(variant) {
                spellings.append(variant)
            }
        }
        return spellings
    }

    /// `value` with every occurrence of the token masked (a header field's value).
    func masked(_ value: String) -> String {
        guard token != nil, value.utf8.count >= TokenMask.minimumLength else { return value }
        var value = value // withUTF8 is mutating; a native string is not copied
        guard value.withUTF8({ holdsToken(UnsafeRawBufferPointer($0)) }) else { return value }
        return String(decoding: masked(whole: Array(value.utf8)), as: UTF8.self)
    }

    /// A whole body, masked (copied only when it holds the token).
    func masked(whole body: [UInt8]) -> [UInt8] {
        guard token != nil, body.withUnsafeBytes(holdsToken) else { return body }
        var out = body
        _ = mask(&out)
        return out
    }

    /// The next piece of a body: what can be passed on now. Bytes at its end that begin the
    /// token are kept until the next piece shows whether the rest follows (or `finish()`).
    mutating func masked(_ chunk: [UInt8]) -> [UInt8] {
        guard token != nil else { return chunk }
        var buffer: [UInt8]
        if held.isEmpty {
            buffer = chunk
        } else {
            buffer = held
            buffer.append(contentsOf: chunk)
        }
        let pastLast = buffer.withUnsafeBytes(holdsToken) ? mask(&buffer) : 0
        // Masked bytes are final; a token may begin only in the last longest - 1 bytes after them.
        let heldFrom = startOfPartialToken(in: buffer, from: max(buffer.count - (longest - 1), pastLast))
        guard heldFrom < buffer.count else {
            held = []
            return buffer
        }
        held = Array(buffer[heldFrom...])
        buffer.removeSubrange(heldFrom...)
        return buffer
    }

    /// The bytes still held back, at the end of the body: a beginning of the token, not all of it.
    mutating func finish() -> [UInt8] {
        defer { held = [] }
        return held
    }

    /// Calls `body` with each spelling's bytes until it returns true; whether one did.
    private func anySpelling(_ body: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        guard var token else { return false } // withUTF8 is mutating; a native string is not copied
        if token.withUTF8({ body(UnsafeRawBufferPointer($0)) }) { return true }
        for spelling in others where spelling.withUnsafeBytes(body) { return true }
        return false
    }

    private func holdsToken(_ bytes: UnsafeRawBufferPointer) -> Bool {
        anySpelling { TokenMask.find($0, in: bytes, from: 0) != nil }
    }

    /// Overwrites each occurrence of each spelling in `bytes` with `*`; returns the index just
    /// past the last one.
    private func mask(_ bytes: inout [UInt8]) -> Int {
        var pastLast = 0
        _ = anySpelling { spelling in
            bytes.withUnsafeMutableBytes { out in
                var from = 0
                while let at = TokenMask.find(spelling, in: UnsafeRawBufferPointer(out), from: from) {
                    for i in at..<(at + spelling.count) { out[i] = UInt8(ascii: "*") }
                    from = at + spelling.count
                    pastLast = max(pastLast, from)
                }
            }
            return false // every spelling
        }
        return pastLast
    }

    /// Where `needle` first occurs in `haystack` at or after `from`.
    private static func find(_ needle: UnsafeRawBufferPointer, in haystack: UnsafeRawBufferPointer, from: Int) -> Int? {
        guard haystack.count - from >= needle.count, let start = haystack.baseAddress, let wanted = needle.baseAddress else { return nil }
        return bff_memmem(start + from, haystack.count - from, wanted, needle.count).map { UnsafeRawPointer($0) - start }
    }

    /// The first index at or after `from` where the rest of `bytes` is a beginning of a
    /// spelling; `bytes.count` if there is none.
    private func startOfPartialToken(in bytes: [UInt8], from: Int) -> Int {
        var first = bytes.count
        _ = anySpelling { spelling in
            for start in max(from, 0)..<first where bytes[start] == spelling[0] {
                if bytes[start...].elementsEqual(spelling.prefix(bytes.count - start)) { first = start; break }
            }
            return false // every spelling
        }
        return first
    }
}
