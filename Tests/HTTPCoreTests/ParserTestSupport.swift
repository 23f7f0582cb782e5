@testable import HTTPCore

/// Helpers for the parser unit tests. Inputs are written as Swift strings whose code points
/// are the bytes (so `\u{0}`, `\u{0B}` and obs-text like `\u{E9}` are single bytes).
enum Wire {
    static func bytes(_ text: String) -> [UInt8] { text.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) } }

    /// The refusal status for `text` fed whole (continuing after complete requests), or nil.
    static func refusal(_ text: String, limits: HTTPLimits = HTTPLimits()) -> Int? {
        feed([bytes(text)], limits: limits).refusal
    }

    /// The requests `text` parses to; empty when it is refused or incomplete.
    static func requests(_ text: String, limits: HTTPLimits = HTTPLimits()) -> [ParsedSummary] {
        let result = feed([bytes(text)], limits: limits)
        return result.refusal == nil ? result.requests : []
    }

    /// The single request `text` parses to, if it is accepted.
    static func request(_ text: String, limits: HTTPLimits = HTTPLimits()) -> ParsedSummary? {
        let all = requests(text, limits: limits)
        return all.count == 1 ? all[0] : nil
    }

    /// The first outcome of one `parse` call on `text`.
    static func firstOutcome(_ text: String, limits: HTTPLimits = HTTPLimits()) -> ParseOutcome {
        var parser = RequestParser(limits: limits)
        return parser.parse(bytes(text))
    }

    static func status(of outcome: ParseOutcome) -> Int? {
        if case let .failed(error) = outcome { return error.status.code }
        return nil
    }
}
