/// The series of the metric `name` in a `/metrics` text whose value is not 0, as their
/// lines (`name{labels} value`): what has been counted. Every documented series is there
/// from the start at 0, so "nothing counted" is this being empty, not the name's absence.
func countedSeries(_ metrics: String, _ name: String) -> [String] {
    metrics.split(separator: "\n").map(String.init).filter { line in
        line.hasPrefix(name + "{") && !line.hasSuffix(" 0")
    }
}

extension Browser {
    /// `/metrics` at `baseURL` once it holds the active-session gauge: a scrape waits 1 s at
    /// most for the count, which a loaded machine may take longer to make (then the gauge is
    /// left out of that scrape). Asks again for up to 20 s; the last text either way.
    func metricsWithSessionCount(_ baseURL: String) async throws -> String {
        var text = ""
        for _ in 0..<100 {
            text = try await request(baseURL + "/metrics").text
            if text.contains("bff_active_sessions ") { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        return text
    }
}
