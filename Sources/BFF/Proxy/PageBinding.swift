import Cryptography

/// Binds the search ids of HAPI FHIR's paging links (`{EHR base}?_getpages=<id>&…`) to the
/// launch whose search produced them.
///
/// Such a link names its search only by the EHR's id, which an EHR need not tie to the token
/// that searched: followed with another launch's token (another patient's tab, say) it could
/// read the first launch's results. So when the rewriter turns the link into
/// `${BFF_PUBLIC_URL}/fhir?_getpages=<tag>.<id>&…`, the tag is a MAC of the launch and the id
/// (HMAC-SHA-256 under a key derived from `BFF_TOKEN_KEY`, 128 bits, base64url: 22
/// characters). A page request must carry its own launch's tag; the EHR gets the id alone.
/// Every instance derives the same key, so any of them can check a link another wrote; a
/// tag made under a `BFF_TOKEN_KEY_FALLBACKS` key is accepted too, so that links written
/// before a key rotation (or by an instance not yet rotated) still work.
struct PageBinding: Sendable {
    /// The characters of a search id that is bound (and of its tag): base64url's and `.`.
    static func isIDByte(_ b: UInt8) -> Bool {
        FHIRPath.isLetterOrDigit(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: ".")
    }

    /// The longest search id bound: HAPI's are UUIDs (36 characters).
    static let maxIDLength = 256
    /// The length of a tag: 16 bytes in base64url.
    static let tagLength = 22

    /// The key tags are made with, then the keys of earlier token keys, which only check them.
    private let keys: [[UInt8]]
    private let launchHash: [UInt8]

    /// The key the tags are made with, derived from `BFF_TOKEN_KEY`'s bytes (once, not per launch).
    static func derivedKey(_ tokenKey: [UInt8]) -> [UInt8] {
        HMACSHA256.authenticationCode(key: tokenKey, message: Array("smart-bff: HAPI paging link binding, v1".utf8))
    }

    /// `derivedKeys`: what `derivedKey(_:)` made of `BFF_TOKEN_KEY`, then of each fallback;
    /// `launchHash`: the launch's `idHash`.
    init(derivedKeys: [[UInt8]], launchHash: String) {
        precondition(!derivedKeys.isEmpty, "a page binding needs a key")
        keys = derivedKeys
        self.launchHash = Array(launchHash.utf8)
    }

    /// The tag of `id` for this launch.
    func tag<C: Collection<UInt8>>(for id: C) -> [UInt8] {
        tag(for: id, key: keys[0])
    }

    private func tag<C: Collection<UInt8>>(for id: C, key: [UInt8]) -> [UInt8] {
        let mac = HMACSHA256.authenticationCode(key: key, message: launchHash + [0] + Array(id))
        return Array(Base64URL.encode(Array(mac.prefix(16))).utf8)
    }

    /// The EHR's search id in `value` (`<tag>.<id>`), if its tag is this launch's; nil for
    /// another launch's link, an altered one, or one that was never bound.
    func id(fromBound value: Substring) -> Substring? {
        let bytes = Array(value.utf8)
        guard bytes.count > PageBinding.tagLength + 1, bytes.count <= PageBinding.tagLength + 1 + PageBinding.maxIDLength,
              bytes[PageBinding.tagLength] == UInt8(ascii: "."), bytes.allSatisfy(PageBinding.isIDByte) else { return nil }
        let id = bytes[(PageBinding.tagLength + 1)...]
        let given = Array(bytes[..<PageBinding.tagLength])
        guard keys.contains(where: { constantTimeEquals(given, tag(for: id, key: $0)) }) else { return nil }
        return value.dropFirst(PageBinding.tagLength + 1)
    }
}
