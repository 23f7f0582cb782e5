extension Duration {
    /// The duration in seconds, as metrics and Dispatch deadlines take it.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
