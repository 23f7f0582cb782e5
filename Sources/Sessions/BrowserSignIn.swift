/// A browser's sign-in as its callback request shows it: its own binding (what its login
/// cookie holds), and the bindings of the other sign-ins that the same browser began and had
/// not finished when it sent the request (their login cookies). Bindings are secrets the
/// browser alone holds (HttpOnly cookies, never in a URL). Two tabs' callbacks that overlap
/// find each other through them: the one that stores its session second joins the first's.
public struct BrowserSignIn: Sendable, Equatable {
    public var binding: String
    public var otherBindings: [String]

    public init(binding: String, otherBindings: [String]) {
        self.binding = binding
        self.otherBindings = otherBindings
    }
}
