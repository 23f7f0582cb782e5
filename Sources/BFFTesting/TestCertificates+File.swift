import Foundation

extension TestCertificates {
    /// Writes `caPEM` to a file in the temporary directory (one per test process) and returns
    /// its path, for `HTTPClient.Configuration.caCertificatesFile` or `BFF_TLS_CA_FILE`.
    public static func caFile() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("smart-bff-test-ca-\(getpid()).pem").path
        try caPEM.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
