import JSON
import Testing

@Suite("strict JSON")
struct JSONParserTests {
    @Test("duplicate members are refused, wherever they are", arguments: [
        #"{"a":1,"a":2}"#, #"{"x":{"sub":"a","sub":"b"}}"#, #"[{"k":1,"k":1}]"#, #"{"a":1,"\u0061":2}"#,
    ])
    func duplicates(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
    }

    @Test("malformed input is refused", arguments: [
        "", "{", "{\"a\":1,}", "[1,]", "01", "1.", ".5", "+1", "NaN", "\"\\ud800\"", "\"\\udc00x\"", "\"a\u{01}b\"",
        "{\"a\":1} x", "tru", "\"\\x41\"", "1e", "[" + String(repeating: "[", count: 100) + String(repeating: "]", count: 101),
    ])
    func malformed(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
    }

    @Test("values parse and serialize back in order")
    func roundTrip() throws {
        let text = #"{"b":[1,2.5,-3e2,true,false,null],"a":"x\"y\\z\n\u00e9\ud83d\ude00","c":{}}"#
        let value = try JSONParser.parse(text)
        #expect(value["b"]?.arrayValue?.count == 6 && value["a"]?.stringValue == "x\"y\\z\né😀")
        #expect(value["b"]?.arrayValue?[2].intValue == -300)
        #expect(try JSONParser.parse(value.serialized()) == value)
        #expect(value.serialized().hasPrefix(#"{"b":[1,2.5,-300,true,false,null],"a":"#))
    }

    @Test("serialization escapes what HTML and JSON need")
    func escaping() {
        let value: JSONValue = ["k": "</script>\u{01}\"\\"]
        #expect(value.serialized() == #"{"k":"\u003c/script>\u0001\"\\"}"#)
    }
}
