/// A sign-in was to replace a browser session that another sign-in of the same browser
/// replaced first (their callbacks overlapped): the launches are in that other sign-in's
/// session, whose cookie the browser has or is about to have. Nothing was stored; the
/// sign-in can start again from that session.
public struct SessionReplacedMeanwhile: Error, CustomStringConvertible {
    public init() {}

    public var description: String { "the browser's session was replaced by another sign-in meanwhile" }
}
