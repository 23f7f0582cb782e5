extension String {
    /// Whether the text holds ASCII control characters (NUL, CR, LF, DEL, ...). Query
    /// parameters are percent-decoded, so they can; none of ours may, and PostgreSQL text
    /// cannot hold NUL at all.
    var hasControlCharacters: Bool {
        utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }
}
