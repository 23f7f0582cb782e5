import Foundation
import JSON
import Logging
import Synchronization

/// Writes one JSON object per log line: `ts`, `level`, `label`, `msg` and the metadata.
/// Metadata keys that could carry credentials are redacted before they are written.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let sink: LogSink

    public init(label: String, sink: LogSink = .standardError) {
        self.label = label
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields: [(String, JSONValue)] = [
            ("ts", .string(JSONLogHandler.timestamp())),
            ("level", .string(event.level.rawValue)),
            ("label", .string(label)),
            ("msg", .string(event.message.description)),
        ]
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        for key in merged.keys.sorted() {
            fields.append((key, JSONLogHandler.redacted(key) ? .string("<redacted>") : JSONLogHandler.json(merged[key]!)))
        }
        sink.write(JSONValue.object(fields).serialized() + "\n")
    }

    /// Keys whose values are never logged, whatever a caller passes.
    static func redacted(_ key: String) -> Bool {
        let k = key.lowercased()
        return ["token", "authorization", "cookie", "secret", "password", "code", "verifier", "assertion"]
            .contains { k.contains($0) } && !k.hasSuffix(".type") && !k.hasSuffix("status")
    }

    static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case let .string(s): return .string(s)
        case let .stringConvertible(c): return .string(c.description)
        case let .array(items): return .array(items.map(json))
        case let .dictionary(d): return .object(d.keys.sorted().map { ($0, json(d[$0]!)) })
        }
    }

    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var seconds = ts.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1,
                      parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, ts.tv_nsec / 1_000_000)
    }
}

/// Where log lines go: standard error (through `StandardErrorWriter`, never blocking the
/// caller), or memory (tests read it back).
public final class LogSink: Sendable {
    private let lines = Mutex<[String]>([])
    private let toStandardError: Bool

    public static let standardError = LogSink(toStandardError: true)

    public init(toStandardError: Bool = false) { self.toStandardError = toStandardError }

    func write(_ line: String) {
        if toStandardError {
            StandardErrorWriter.shared.write(line)
        } else {
            lines.withLock { $0.append(line) }
        }
    }

    /// The lines written so far (memory sinks only).
    public var captured: [String] { lines.withLock { $0 } }
}
