import Foundation

/// Loads a Wycheproof JSON file from the test bundle.
enum Wycheproof {
    static func load(_ name: String) throws -> [String: Any] {
        let url = Bundle.module.url(forResource: "Fixtures/wycheproof/" + name, withExtension: "json")!
        return try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
    }

    static func groups(_ file: [String: Any]) -> [[String: Any]] { file["testGroups"] as! [[String: Any]] }
}

extension Array where Element == UInt8 {
    init(hex: String) {
        var bytes: [UInt8] = []
        var it = hex.utf8.makeIterator()
        while let h = it.next(), let l = it.next() {
            bytes.append(UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16)!)
        }
        self = bytes
    }
}

/// Unsigned big-endian arithmetic for building test moduli.
enum BigEndian {
    static func multiply(_ a: [UInt8], by m: Int) -> [UInt8] {
        var out: [UInt8] = [], carry = 0
        for byte in a.reversed() {
            let v = Int(byte) * m + carry
            out.append(UInt8(v & 0xFF))
            carry = v >> 8
        }
        while carry > 0 { out.append(UInt8(carry & 0xFF)); carry >>= 8 }
        return Array(out.reversed().drop { $0 == 0 })
    }

    static func bitLength(_ a: [UInt8]) -> Int {
        guard let first = a.first(where: { $0 != 0 }), let i = a.firstIndex(of: first) else { return 0 }
        return (a.count - i) * 8 - first.leadingZeroBitCount
    }
}
