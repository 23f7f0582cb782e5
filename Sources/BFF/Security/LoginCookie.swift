import Cryptography
import HTTPCore
import Sessions

/// Binds a sign-in to the browser that started it (login CSRF, RFC 9700 §4.7): `/launch` and
/// `/login` set a cookie named after their `state` and holding the state's binding (a MAC of
/// it under a key derived from `BFF_TOKEN_KEY`), and `/callback` accepts that `state` only
/// from a browser that sends it. Without it, an attacker's own callback URL (their code and
/// state) opened in a victim's browser would add the attacker's EHR account and patient to
/// the victim's session, as its most recent launch. A cookie per `state`, so that sign-ins
/// in several tabs at once do not undo each other; it lives as long as the `state` (10
/// minutes) and has the session cookie's attributes.
///
/// The binding, unlike the state, never travels in a URL (EHR and proxy logs, browser
/// history hold states): it is what a callback shows of the browser's other sign-ins under
/// way (`otherBindings`), so that a state read from a log cannot pass for one of them.
struct LoginCookie: Sendable {
    let session: SessionCookie
    let lifetime: Int
    /// The key bindings are made with, then the keys of `BFF_TOKEN_KEY_FALLBACKS`, which only
    /// check them (a sign-in begun before a key rotation, or on an instance not yet rotated).
    let keys: [[UInt8]]

    /// The key bindings are made with, derived from a token key's bytes.
    static func derivedKey(_ tokenKey: [UInt8]) -> [UInt8] {
        HMACSHA256.authenticationCode(key: tokenKey, message: Array("smart-bff: sign-in browser binding, v1".utf8))
    }

    /// The length of a binding: 16 bytes in base64url.
    static let bindingLength = 22

    /// The cookie's name for `state`: a prefix of the state's SHA-256, so that the name
    /// tells nothing.
    func name(for state: String) -> String {
        (session.secure ? "__Host-" : "") + "bff_login_" + Identifier.hash(state).prefix(16)
    }

    /// The binding of `state` (under the current key, or `key`).
    func binding(for state: String, key: [UInt8]? = nil) -> String {
        Base64URL.encode(Array(HMACSHA256.authenticationCode(key: key ?? keys[0], message: Array(state.utf8)).prefix(16)))
    }

    /// `Set-Cookie` value that binds `state` to this browser.
    func set(_ state: String) -> String { name(for: state) + "=" + binding(for: state) + session.attributes + "; Max-Age=\(lifetime)" }

    /// `Set-Cookie` value that deletes the binding once its sign-in is done.
    func expire(_ state: String) -> String { name(for: state) + "=" + session.attributes + "; Max-Age=0" }

    /// The binding the request's login cookie for `state` holds, when it is that state's:
    /// the request comes from the browser that started the sign-in. (The cookie's value as it
    /// is, not recomputed: it may have been made under a key this instance only checks, as
    /// may the browser's other login cookies.)
    func binding(of state: String, in request: Request) -> String? {
        guard let value = request.cookie(name(for: state)) else { return nil }
        // The state itself, as versions before 2026-11-27 set the cookie: a sign-in begun on
        // one of them during a rolling upgrade still completes (its binding links nothing
        // else: other bindings are 22 characters). Remove in the next release.
        if constantTimeEquals(Array(state.utf8), Array(value.utf8)) { return value }
        return keys.contains { constantTimeEquals(Array(binding(for: state, key: $0).utf8), Array(value.utf8)) } ? value : nil
    }

    /// The most other sign-ins' bindings that a callback takes from its request.
    static let otherBindingsLimit = 16

    /// The bindings of the request's other login cookies: the sign-ins that its browser began
    /// and had not finished when it sent the request. Only values of a binding's form count,
    /// and at most `otherBindingsLimit`.
    func otherBindings(in request: Request, besides state: String) -> [String] {
        let prefix = (session.secure ? "__Host-" : "") + "bff_login_"
        let own = name(for: state)
        let values = request.cookies(prefixed: prefix).lazy
            .filter { $0.name != own && $0.value.utf8.count == LoginCookie.bindingLength && Base64URL.decode($0.value)?.count == 16 }
            .map(\.value)
        return Array(Set(values).prefix(LoginCookie.otherBindingsLimit))
    }
}
