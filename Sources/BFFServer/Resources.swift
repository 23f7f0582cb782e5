import Foundation

/// Files the executable serves that live in the repository (`openapi.yaml`).
enum Resources {
    /// What `/openapi.yaml` serves when the file is not found: valid, and empty.
    static let stubOpenAPI = Array("openapi: 3.1.0\ninfo: {title: smart-bff, version: unknown}\npaths: {}\n".utf8)

    /// `openapi.yaml` from `BFF_OPENAPI_FILE` (only there, when set), else beside the
    /// executable (or up to four folders above it), else the working directory; nil when none.
    static func openAPI() -> [UInt8]? {
        let env = ProcessInfo.processInfo.environment
        if let path = env["BFF_OPENAPI_FILE"] { return FileManager.default.contents(atPath: path).map(Array.init) }
        var candidates: [String] = []
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<5 {
            candidates.append(dir.appendingPathComponent("openapi.yaml").path)
            dir = dir.deletingLastPathComponent()
        }
        candidates.append(FileManager.default.currentDirectoryPath + "/openapi.yaml")
        for path in candidates {
            if let data = FileManager.default.contents(atPath: path) { return Array(data) }
        }
        return nil
    }
}
