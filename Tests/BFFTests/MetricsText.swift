/// The series of the metric `name` in a `/metrics` text whose value is not 0, as their
/// lines (`name{labels} value`): what has been counted. Every documented series is there
/// from the start at 0, so "nothing counted" is this being empty, not the name's absence.
func countedSeries(_ metrics: String, _ name: String) -> [String] {
    metrics.split(separator: "\n").map(String.init).filter { line in
        line.hasPrefix(name + "{") && !line.hasSuffix(" 0")
    }
}
