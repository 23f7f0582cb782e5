/// Size limits applied while parsing a request. Every one has a safe default.
public struct HTTPLimits: Sendable, Equatable {
    /// Longest request line, in bytes (414 beyond).
    public var maxRequestLineBytes = 8 * 1024
    /// Largest header block (request line excluded), in bytes (431 beyond).
    public var maxHeaderBytes = 16 * 1024
    /// Most header fields (431 beyond).
    public var maxHeaderCount = 100
    /// Largest request body (413 beyond, refused before it is read).
    public var maxBodyBytes = 1024 * 1024

    public init() {}
}
