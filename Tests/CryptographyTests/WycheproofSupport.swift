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
