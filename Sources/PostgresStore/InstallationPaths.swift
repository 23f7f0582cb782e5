import Foundation

/// Where smart-bff looks for the files that ship with it (`migrations/`, `openapi.yaml`).
public enum InstallationPaths {
    /// `name` beside the executable and in each of the four folders above it, then in the
    /// working directory, in that order. The executable is the one running, as the kernel
    /// names it (`/proc/self/exe`), not `argv[0]`: run by a bare name from `PATH`, that
    /// would be read against the working directory, and files planted there (SQL run as
    /// the database's owner) would come first.
    public static func candidates(for name: String) -> [URL] {
        var candidates: [URL] = []
        if var dir = executable?.deletingLastPathComponent() {
            for _ in 0..<5 {
                candidates.append(dir.appendingPathComponent(name))
                dir = dir.deletingLastPathComponent()
            }
        }
        candidates.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(name))
        return candidates
    }

    /// The running executable's path, symbolic links resolved.
    static var executable: URL? {
        guard let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        return URL(fileURLWithPath: path)
    }
}
