import ArgumentParser
import Foundation
import PostgresStore

/// Files the executable serves that live in the repository (`openapi.yaml`).
enum Resources {
    /// What `/openapi.yaml` serves when the file is not found: valid, and empty.
    static let stubOpenAPI = Array("openapi: 3.1.0\ninfo: {title: smart-bff, version: unknown}\npaths: {}\n".utf8)

    /// What is wrong with `BFF_OPENAPI_FILE` when it is set (a file that cannot be read), or nil.
    static func openAPIFileProblem() -> String? {
        guard let path = EnvironmentValue.named("BFF_OPENAPI_FILE"),
              FileManager.default.contents(atPath: path) == nil else { return nil }
        return "BFF_OPENAPI_FILE: \(path) cannot be read"
    }

    /// Why the migrations cannot be found, or nil: `BFF_MIGRATIONS_DIR` names a folder
    /// without them, or, unset, none is beside the executable or in the working directory.
    static func migrationsProblem() -> String? {
        guard Migrator.locateDirectory() == nil else { return nil }
        if let dir = EnvironmentValue.named("BFF_MIGRATIONS_DIR") {
            return "BFF_MIGRATIONS_DIR: \(dir) holds no migrations (0001_initial.sql)"
        }
        return "BFF_MIGRATIONS_DIR: unset, and no migrations/ beside the executable or in the working directory"
    }

    /// `DATABASE_URL`, for the commands that need only it (`migrate`, `audit export`):
    /// unset, empty or unreadable by libpq is a configuration error (exit 78).
    static func databaseURL() throws -> String {
        guard let url = EnvironmentValue.named("DATABASE_URL") else {
            throw configurationError(["DATABASE_URL: required (a libpq connection string or URI)"])
        }
        if let problem = ConnectionString.configurationProblem(url) { throw configurationError([problem]) }
        return url
    }

    /// Ends the process as a configuration error (exit 78, EX_CONFIG), naming `problems`.
    static func configurationError(_ problems: [String]) -> ExitCode {
        FileHandle.standardError.write(Data(("smart-bff: configuration error\n" + problems.joined(separator: "\n") + "\n").utf8))
        return ExitCode(78)
    }

    /// `openapi.yaml` from `BFF_OPENAPI_FILE` (only there, when set), else beside the
    /// executable (or up to four folders above it), else the working directory; nil when none.
    static func openAPI() -> [UInt8]? {
        if let path = EnvironmentValue.named("BFF_OPENAPI_FILE") { return FileManager.default.contents(atPath: path).map(Array.init) }
        for url in InstallationPaths.candidates(for: "openapi.yaml") {
            if let data = FileManager.default.contents(atPath: url.path) { return Array(data) }
        }
        return nil
    }
}
