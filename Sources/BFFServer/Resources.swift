import Foundation

/// Files the executable serves that live in the repository (`openapi.yaml`).
enum Resources {
    /// `openapi.yaml` from `BFF_OPENAPI_FILE`, the working directory, or beside the executable.
    static func openAPI() -> [UInt8] {
        let env = ProcessInfo.processInfo.environment
        var candidates: [String] = []
        if let path = env["BFF_OPENAPI_FILE"] { candidates.append(path) }
        candidates.append(FileManager.default.currentDirectoryPath + "/openapi.yaml")
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        var dir = exe
        for _ in 0..<5 {
            candidates.append(dir.appendingPathComponent("openapi.yaml").path)
            dir = dir.deletingLastPathComponent()
        }
        for path in candidates {
            if let data = FileManager.default.contents(atPath: path) { return Array(data) }
        }
        return Array("openapi: 3.1.0\ninfo: {title: smart-bff, version: unknown}\npaths: {}\n".utf8)
    }
}
