/// A browser's sign-in as its callback request shows it: its own `state`, and the `state`s of
/// the other sign-ins that the same browser began and had not finished when it sent the
/// request (their login cookies). Two tabs' callbacks that overlap find each other through
/// these: the one that stores its session second joins the first's, whose cookie the browser
/// gets while the second is under way.
public struct BrowserSignIn: Sendable, Equatable {
    public var state: String
    public var otherStates: [String]

    public init(state: String, otherStates: [String]) {
        self.state = state
        self.otherStates = otherStates
    }
}
