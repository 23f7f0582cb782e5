import HTTPCore
import Sessions

/// Binds a sign-in to the browser that started it (login CSRF, RFC 9700 §4.7): `/launch` and
/// `/login` set a cookie named after their `state` and holding it, and `/callback` accepts
/// that `state` only from a browser that sends the cookie. Without it, an attacker's own
/// callback URL (their code and state) opened in a victim's browser would add the attacker's
/// EHR account and patient to the victim's session, as its most recent launch. A cookie per
/// `state`, so that sign-ins in several tabs at once do not undo each other; it lives as long
/// as the `state` (10 minutes) and has the session cookie's attributes.
struct LoginCookie: Sendable {
    let session: SessionCookie
    let lifetime: Int

    /// The cookie's name for `state`: a prefix of the state's SHA-256, so that the name
    /// tells nothing and the value (the state) must match.
    func name(for state: String) -> String {
        (session.secure ? "__Host-" : "") + "bff_login_" + Identifier.hash(state).prefix(16)
    }

    /// `Set-Cookie` value that binds `state` to this browser.
    func set(_ state: String) -> String { name(for: state) + "=" + state + session.attributes + "; Max-Age=\(lifetime)" }

    /// `Set-Cookie` value that deletes the binding once its sign-in is done.
    func expire(_ state: String) -> String { name(for: state) + "=" + session.attributes + "; Max-Age=0" }

    /// The most other sign-ins' states that a callback takes from its request.
    static let otherStatesLimit = 16

    /// The states of the request's other login cookies: the sign-ins that its browser began
    /// and had not finished when it sent the request. Only well-formed cookies count (named
    /// after their value), and at most `otherStatesLimit`.
    func otherStates(in request: Request, besides state: String) -> [String] {
        let prefix = (session.secure ? "__Host-" : "") + "bff_login_"
        let states = request.cookies(prefixed: prefix).lazy
            .filter { $0.value != state && $0.value.utf8.count <= 512 && self.name(for: $0.value) == $0.name }
            .map(\.value)
        return Array(Set(states).prefix(LoginCookie.otherStatesLimit))
    }

    /// Whether the request comes from the browser that started the sign-in of `state`.
    func isBound(_ state: String, in request: Request) -> Bool {
        request.cookie(name(for: state)) == state
    }
}
