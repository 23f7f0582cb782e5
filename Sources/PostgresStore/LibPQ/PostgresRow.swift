import Foundation

/// One result row, copied out of libpq (text format). Column access is by index.
public struct PostgresRow: Sendable {
    let values: [String?]

    public subscript(index: Int) -> String? { values[index] }

    public func string(_ i: Int) throws(PostgresError) -> String {
        guard let v = values[i] else { throw PostgresError(.decoding, "column \(i) is NULL") }
        return v
    }

    public func optionalString(_ i: Int) -> String? { values[i] }

    public func int(_ i: Int) throws(PostgresError) -> Int {
        guard let v = values[i], let n = Int(v) else { throw PostgresError(.decoding, "column \(i) is not an integer") }
        return n
    }

    public func double(_ i: Int) throws(PostgresError) -> Double {
        guard let v = values[i], let n = Double(v) else { throw PostgresError(.decoding, "column \(i) is not a number") }
        return n
    }

    public func bool(_ i: Int) throws(PostgresError) -> Bool {
        guard let v = values[i] else { throw PostgresError(.decoding, "column \(i) is NULL") }
        return v == "t"
    }

    /// A timestamp selected as `extract(epoch from col)`.
    public func date(_ i: Int) throws(PostgresError) -> Date { Date(timeIntervalSince1970: try double(i)) }

    public func optionalDate(_ i: Int) throws(PostgresError) -> Date? { values[i] == nil ? nil : try date(i) }

    /// A bytea column (hex output format).
    public func bytes(_ i: Int) throws(PostgresError) -> [UInt8] {
        guard let v = values[i], v.hasPrefix("\\x"), v.utf8.count % 2 == 0 else { throw PostgresError(.decoding, "column \(i) is not bytea") }
        var out: [UInt8] = []
        out.reserveCapacity(v.utf8.count / 2 - 1)
        var it = v.utf8.dropFirst(2).makeIterator()
        while let h = it.next(), let l = it.next() {
            guard let hv = PostgresRow.hex(h), let lv = PostgresRow.hex(l) else { throw PostgresError(.decoding, "column \(i) is not bytea") }
            out.append(hv << 4 | lv)
        }
        return out
    }

    public func optionalBytes(_ i: Int) throws(PostgresError) -> [UInt8]? { values[i] == nil ? nil : try bytes(i) }

    static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }
}
