import HTTPCore

/// Headers every smart-bff response carries: no sniffing, no referrer leaking codes or
/// state. Framing is not refused: EHRs embed SMART apps, and the app may share the BFF's
/// origin (see `BFF_COOKIE_SAMESITE=none`).
public struct SecurityHeaders: Middleware {
    public init() {}

    public func finish(_ request: Request, _ response: inout Response) {
        if !response.headers.contains("X-Content-Type-Options") { response.headers.add("X-Content-Type-Options", "nosniff") }
        if !response.headers.contains("Referrer-Policy") { response.headers.add("Referrer-Policy", "no-referrer") }
    }
}
