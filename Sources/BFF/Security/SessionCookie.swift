import HTTPCore

/// The browser session cookie: `HttpOnly`, `SameSite=Lax` (or `None; Secure; Partitioned`),
/// `Path=/`, no `Domain`; `Secure` and the `__Host-` prefix whenever the BFF is served over https.
public struct SessionCookie: Sendable {
    public let secure: Bool
    public let sameSiteNone: Bool

    public init(secure: Bool, sameSiteNone: Bool) {
        self.secure = secure
        self.sameSiteNone = sameSiteNone
    }

    public var name: String { secure ? "__Host-bff_session" : "bff_session" }

    /// `Set-Cookie` value that stores `value`.
    public func set(_ value: String) -> String { name + "=" + value + attributes }

    /// `Set-Cookie` value that deletes the cookie.
    public var expire: String { name + "=" + attributes + "; Max-Age=0" }

    /// The attributes every cookie of the BFF carries (`LoginCookie`'s too).
    var attributes: String {
        var a = "; Path=/; HttpOnly"
        if secure || sameSiteNone { a += "; Secure" }
        a += sameSiteNone ? "; SameSite=None; Partitioned" : "; SameSite=Lax"
        return a
    }

    /// The session id the request carries, if any.
    public func read(from request: Request) -> String? {
        guard let value = request.cookie(name), !value.isEmpty, value.utf8.count <= 128 else { return nil }
        return value
    }
}
