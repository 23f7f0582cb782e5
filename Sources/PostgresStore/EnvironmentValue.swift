import Foundation

/// How smart-bff reads each of its environment variables, in every command: spaces and line
/// ends around a value are no part of it (a value read from a file or a Kubernetes secret
/// often ends in a newline), and an empty value is an unset one.
public enum EnvironmentValue {
    /// The value of `name` in `environment`, trimmed; nil when unset or blank.
    public static func named(_ name: String, in environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        guard let value = environment[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else { return nil }
        return value
    }
}
