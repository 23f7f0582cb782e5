import HTTPCore

extension Request {
    /// The value of the query parameter `name`, which may appear at most once (RFC 6749
    /// §3.1: "parameters MUST NOT be included more than once"): were a second one taken,
    /// whichever copy a check read and whichever the next step used could differ.
    /// - Throws: 400 when it appears more than once.
    func singleQueryParameter(_ name: String) throws(HTTPError) -> String? {
        let values = queryParameters(name)
        guard values.count <= 1 else { throw Problems.badRequest("The \(name) parameter appears more than once.") }
        return values.first
    }
}
