/// An ordered list of HTTP header fields. Names compare case-insensitively; order and
/// repeated fields are preserved, as RFC 9110 §5.3 requires.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (name: String, value: String)
    private var fields: [Element] = []

    public init() {}
    public init(_ fields: [(String, String)]) { self.fields = fields.map { (name: $0.0, value: $0.1) } }
    public init(dictionaryLiteral elements: (String, String)...) { self.init(elements) }

    /// Room for `capacity` fields without growing (for responses built field by field).
    public init(minimumCapacity capacity: Int) { fields.reserveCapacity(capacity) }

    public var count: Int { fields.count }
    public func makeIterator() -> IndexingIterator<[Element]> { fields.makeIterator() }

    /// The first value of the field `name`, or nil.
    public subscript(name: String) -> String? {
        fields.first { $0.name.equalsIgnoringASCIICase(name) }?.value
    }

    /// Every value of the field `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.equalsIgnoringASCIICase(name) }.map(\.value)
    }

    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// Appends a field, keeping any existing ones of the same name.
    public mutating func add(_ name: String, _ value: String) { fields.append((name: name, value: value)) }

    /// Replaces every field `name` with one field holding `value`.
    public mutating func replace(_ name: String, _ value: String) {
        remove(name)
        fields.append((name: name, value: value))
    }

    public mutating func remove(_ name: String) {
        fields.removeAll { $0.name.equalsIgnoringASCIICase(name) }
    }
}

extension String {
    /// ASCII case-insensitive comparison, as HTTP field names and tokens need. Over the
    /// contiguous bytes: walking the two UTF-8 views showed in the proxy's profiles.
    @inlinable
    public func equalsIgnoringASCIICase(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        // Over the strings' own storage, without copying them (a copy of each, for a mutating
        // `withUTF8`, cost two reference counts a call); bridged strings byte by byte.
        let contiguous = utf8.withContiguousStorageIfAvailable { x in
            other.utf8.withContiguousStorageIfAvailable { y in
                for i in 0..<x.count where !String.sameIgnoringASCIICase(x[i], y[i]) { return false }
                return true
            }
        }
        return (contiguous ?? nil) ?? zip(utf8, other.utf8).allSatisfy(String.sameIgnoringASCIICase)
    }

    @usableFromInline @inline(__always)
    static func sameIgnoringASCIICase(_ x: UInt8, _ y: UInt8) -> Bool {
        guard x != y else { return true }
        let lower = x | 0x20 // equal apart from bit 5: the same letter in two cases?
        return lower == y | 0x20 && lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "z")
    }
}

extension Substring.UTF8View {
    /// Without the spaces and tabs (OWS) around it.
    func trimmingOWS() -> Substring.UTF8View {
        var s = self
        while let f = s.first, f == SP || f == HT { s = s.dropFirst() }
        while let l = s.last, l == SP || l == HT { s = s.dropLast() }
        return s
    }

    /// Whether these bytes are `other`'s, ignoring the case of ASCII letters.
    func equalsIgnoringASCIICase(_ other: String) -> Bool {
        count == other.utf8.count && zip(self, other.utf8).allSatisfy(String.sameIgnoringASCIICase)
    }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
}
