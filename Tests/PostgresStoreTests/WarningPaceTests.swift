import Foundation
@testable import PostgresStore
import Testing

@Suite("warning pace")
struct WarningPaceTests {
    @Test("the first occurrence warns, later ones within the interval are held back and counted in the next warning")
    func pace() {
        let pace = WarningPace(interval: 60)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(pace.due(now: start) == 0)
        for second in [1.0, 30, 59.9] { #expect(pace.due(now: start.addingTimeInterval(second)) == nil) }
        #expect(pace.due(now: start.addingTimeInterval(60)) == 3)
        #expect(pace.due(now: start.addingTimeInterval(61)) == nil)
        #expect(pace.due(now: start.addingTimeInterval(200)) == 1)
    }
}
