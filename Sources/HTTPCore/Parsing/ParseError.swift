/// Why a request was refused by the parser. Every parse error closes the connection.
public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The status to answer with (400, 413, 414, 431, 501 or 505).
    public let status: HTTPStatus
    public let reason: String

    init(_ status: HTTPStatus, _ reason: String) {
        self.status = status
        self.reason = reason
    }

    static func bad(_ reason: String) -> ParseError { ParseError(.badRequest, reason) }

    public var description: String { "\(status.code): \(reason)" }
}
