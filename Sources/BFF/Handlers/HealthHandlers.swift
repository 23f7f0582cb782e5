import HTTPCore

/// `/healthz` and `/openapi.yaml`: answered on the I/O thread, they never wait on anything.
enum HealthHandlers {
    static let healthy = Response(status: .ok, contentType: "application/json",
                                  body: Array(#"{"status":"ok"}"#.utf8), headers: ["Cache-Control": "no-store"])

    static func register(on router: inout Router, openAPI: [UInt8]) {
        router.onImmediate("GET", "/healthz") { _ in healthy }
        let spec = Response(status: .ok, contentType: "application/yaml", body: openAPI)
        router.onImmediate("GET", "/openapi.yaml") { _ in spec }
    }
}
