import Foundation

extension TestCertificates {
    /// Writes `caPEM` to a file in the temporary directory and returns its path, for
    /// `HTTPClient.Configuration.caCertificatesFile` or `BFF_TLS_CA_FILE`. One file for every
    /// test process: its content never changes, and each write replaces it atomically.
    public static func caFile() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("smart-bff-test-ca.pem").path
        try caPEM.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
