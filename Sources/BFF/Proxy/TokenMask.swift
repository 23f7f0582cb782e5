import CLinux

/// Masks the launch's access token in what the EHR answers, before a front end sees it.
///
/// The contract's invariant is that tokens never reach a front end, yet some servers echo a
/// request's credentials: an OperationOutcome's diagnostics quoting the `Authorization`
/// field, a stack trace, a URL with `access_token=` in a `Location` or a Binary. Every
/// occurrence of the token's bytes is overwritten with `*`, one for one: lengths stay as
/// declared, and JSON stays JSON. A token with `/` (base64, not base64url) is also masked as
/// JSON writers often escape it, `\/` for each `/`.
///
/// Across chunks: bytes at a chunk's end that begin the token are held back until the next
/// chunk shows whether the rest follows; `finish()` gives them up at the end. A chunk that
/// holds no token and ends in no beginning of one goes on as it is.
struct TokenMask {
    /// Shorter tokens are not masked: a token of a few bytes would mask ordinary text.
    /// No EHR issues one (they carry 128 bits or more, 22+ characters in base64url).
    static let minimumLength = 16

    /// The token as written, and as JSON may escape it; none when it is too short to mask.
    private let spellings: [[UInt8]]
    /// The longest spelling's length.
    private let longest: Int
    private var held: [UInt8] = []

    /// A mask for `token`; one that masks nothing when the token is shorter than `minimumLength`.
    init(token: String) {
        guard token.utf8.count >= TokenMask.minimumLength else { (spellings, longest) = ([], 0); return }
        let plain = Array(token.utf8)
        let slashes = plain.count { $0 == UInt8(ascii: "/") }
        guard slashes > 0 else { (spellings, longest) = ([plain], plain.count); return } // base64url: one spelling
        var escaped: [UInt8] = []
        escaped.reserveCapacity(plain.count + slashes)
        for byte in plain {
            if byte == UInt8(ascii: "/") { escaped.append(UInt8(ascii: "\\")) }
            escaped.append(byte)
        }
        (spellings, longest) = ([plain, escaped], escaped.count)
    }

    /// `value` with every occurrence of the token masked (a header field's value).
    func masked(_ value: String) -> String {
        guard !spellings.isEmpty, value.utf8.count >= TokenMask.minimumLength else { return value }
        let bytes = Array(value.utf8)
        let out = masked(whole: bytes)
        return out == bytes ? value : String(decoding: out, as: UTF8.self)
    }

    /// A whole body, masked (copied only when it holds the token).
    func masked(whole body: [UInt8]) -> [UInt8] {
        guard spellings.contains(where: { TokenMask.find($0, in: body, from: 0) != nil }) else { return body }
        var out = body
        for spelling in spellings { _ = TokenMask.mask(spelling, in: &out) }
        return out
    }

    /// The next piece of a body: what can be passed on now. Bytes at its end that begin the
    /// token are kept until the next piece shows whether the rest follows (or `finish()`).
    mutating func masked(_ chunk: [UInt8]) -> [UInt8] {
        guard !spellings.isEmpty else { return chunk }
        var buffer: [UInt8]
        if held.isEmpty {
            buffer = chunk
        } else {
            buffer = held
            buffer.append(contentsOf: chunk)
        }
        var pastLast = 0
        for spelling in spellings where TokenMask.find(spelling, in: buffer, from: 0) != nil {
            pastLast = max(pastLast, TokenMask.mask(spelling, in: &buffer))
        }
        // Masked bytes are final; a token may begin only in the last longest - 1 bytes after them.
        let from = max(buffer.count - (longest - 1), pastLast)
        let heldFrom = spellings.map { TokenMask.startOfPartialToken($0, in: buffer, from: from) }.min() ?? buffer.count
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

    /// Where the token first occurs in `bytes` at or after `from`.
    private static func find(_ token: [UInt8], in bytes: [UInt8], from: Int) -> Int? {
        guard bytes.count - from >= token.count else { return nil }
        return token.withUnsafeBytes { needle in
            bytes.withUnsafeBytes { haystack in
                bff_memmem(haystack.baseAddress! + from, haystack.count - from, needle.baseAddress!, needle.count)
                    .map { UnsafeRawPointer($0) - haystack.baseAddress! }
            }
        }
    }

    /// Overwrites each occurrence of `token` in `bytes` with `*`; returns the index just past
    /// the last one.
    private static func mask(_ token: [UInt8], in bytes: inout [UInt8]) -> Int {
        var from = 0
        while let at = find(token, in: bytes, from: from) {
            for i in at..<(at + token.count) { bytes[i] = UInt8(ascii: "*") }
            from = at + token.count
        }
        return from
    }

    /// The first index at or after `from` where the rest of `bytes` is a beginning of the
    /// token; `bytes.count` if there is none.
    private static func startOfPartialToken(_ token: [UInt8], in bytes: [UInt8], from: Int) -> Int {
        for start in max(from, 0)..<bytes.count where bytes[start] == token[0] {
            if bytes[start...].elementsEqual(token.prefix(bytes.count - start)) { return start }
        }
        return bytes.count
    }
}
