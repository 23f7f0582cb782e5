/// The fields of a response head, in order, as received: their bytes in one buffer, each
/// name and value a range of it. A field's strings are made only when it is read.
///
/// A head of 8 to 25 fields (an EHR's security and CORS fields among them), of which the
/// proxy reads five, used to cost two strings per field: about a tenth of the proxy's
/// allocations per read.
public struct ResponseFields: Sendable, RandomAccessCollection {
    public typealias Element = (name: String, value: String)

    /// Names and values, one after another (a value after its name).
    private var bytes: [UInt8] = []
    private var spans: [(name: Range<Int>, value: Range<Int>)] = []

    /// Fields made from strings (for tests and callers that build a response).
    public init(_ fields: [(name: String, value: String)] = []) {
        for field in fields {
            var (name, value) = field
            name.withUTF8 { n in value.withUTF8 { v in append(name: n, value: v[...]) } }
        }
    }

    init(minimumByteCapacity: Int) {
        bytes.reserveCapacity(minimumByteCapacity)
        spans.reserveCapacity(16)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { spans.count }

    public subscript(position: Int) -> (name: String, value: String) {
        let span = spans[position]
        return bytes.withUnsafeBufferPointer { all in
            (name: String(decoding: all[span.name], as: UTF8.self), value: String(decoding: all[span.value], as: UTF8.self))
        }
    }

    /// The first value of the field `name` (compared ignoring ASCII case), or nil. A value
    /// that is not UTF-8 (obs-text: an `ETag` of Latin-1 bytes, say) reads as nil: as a
    /// string it could only be altered, and an altered validator never matches again.
    public func firstValue(named name: String) -> String? {
        var name = name // withUTF8 is mutating; a native string is not copied
        return name.withUTF8 { wanted in
            bytes.withUnsafeBufferPointer { all in
                for span in spans where ResponseFields.equalsIgnoringASCIICase(all[span.name], wanted) {
                    let bytes = all[span.value]
                    let value = String(decoding: bytes, as: UTF8.self)
                    // Only a byte of 0x80 or more can be invalid; decoding replaces what is
                    // not UTF-8 (U+FFFD, other bytes), and then the value differs.
                    guard bytes.contains(where: { $0 >= 0x80 }) else { return value }
                    return value.utf8.elementsEqual(bytes) ? value : nil
                }
                return nil
            }
        }
    }

    /// Every value of the field `name` (compared ignoring ASCII case), in order.
    public func values(named name: String) -> [String] {
        var name = name // withUTF8 is mutating; a native string is not copied
        return name.withUTF8 { wanted in
            bytes.withUnsafeBufferPointer { all in
                var values: [String] = [] // no allocation when no field has the name
                for span in spans where ResponseFields.equalsIgnoringASCIICase(all[span.name], wanted) {
                    values.append(String(decoding: all[span.value], as: UTF8.self))
                }
                return values
            }
        }
    }

    /// Calls `body` with each field's name and value bytes, in order, without making strings.
    func forEachField(_ body: (_ name: UnsafeBufferPointer<UInt8>, _ value: Slice<UnsafeBufferPointer<UInt8>>) throws(HTTPClientError) -> Void)
        throws(HTTPClientError) {
        try bytes.withUnsafeBufferPointer { (all: UnsafeBufferPointer<UInt8>) throws(HTTPClientError) in
            for span in spans { try body(UnsafeBufferPointer(rebasing: all[span.name]), all[span.value]) }
        }
    }

    /// Appends a field: `name` and `value` as they are (the parser has checked and trimmed them).
    mutating func append(name: UnsafeBufferPointer<UInt8>, value: Slice<UnsafeBufferPointer<UInt8>>) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name)
        let valueStart = bytes.count
        bytes.append(contentsOf: value)
        spans.append((name: nameStart..<valueStart, value: valueStart..<bytes.count))
    }

    /// Continues the last field's value with `more` (an obs-fold line, RFC 9112 §5.2), joined
    /// by a space. The last value ends the buffer, so it grows in place.
    mutating func continueLast(with more: Slice<UnsafeBufferPointer<UInt8>>) {
        guard let last = spans.indices.last, !more.isEmpty else { return }
        if !spans[last].value.isEmpty { bytes.append(UInt8(ascii: " ")) }
        bytes.append(contentsOf: more)
        spans[last].value = spans[last].value.lowerBound..<bytes.count
    }

    private static func equalsIgnoringASCIICase(_ x: Slice<UnsafeBufferPointer<UInt8>>, _ y: UnsafeBufferPointer<UInt8>) -> Bool {
        guard x.count == y.count else { return false }
        for (a, b) in zip(x, y) where a != b {
            let lower = a | 0x20 // equal apart from bit 5: the same letter in two cases?
            guard lower == b | 0x20, lower >= UInt8(ascii: "a"), lower <= UInt8(ascii: "z") else { return false }
        }
        return true
    }
}
