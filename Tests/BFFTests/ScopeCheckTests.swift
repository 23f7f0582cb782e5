@testable import BFF
import SMART
import Testing

/// What the launch's scopes allow beyond a plain read or search: type history, and the
/// resources a search brings in besides its matches.
@Suite("scope checks: history and included resources")
struct ScopeCheckTests {
    static let laboratory = "patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory"

    @Test("type history needs search with no restriction: a restricted grant is refused even with the category in the query")
    func typeHistory() {
        let restricted = SMARTScopes(ScopeCheckTests.laboratory)
        #expect(!restricted.allows("Observation", .history, query: [("category", "laboratory")]))
        #expect(!restricted.allows("Observation", .history))
        // The same query is a search the grant allows, and a read by id stays the EHR's to judge.
        #expect(restricted.allows("Observation", .search, query: [("category", "laboratory")]) && restricted.allows("Observation", .read))
        for scope in ["patient/Observation.rs", "patient/Observation.read", "user/Observation.*", "patient/*.rs"] {
            #expect(SMARTScopes(scope).allows("Observation", .history), "\(scope)")
        }
        for scope in ["patient/Observation.r", "patient/Condition.rs", "patient/*.r"] {
            #expect(!SMARTScopes(scope).allows("Observation", .history), "\(scope)")
        }
        // System history: a wildcard grant with no restriction.
        #expect(SMARTScopes("patient/*.rs").allows("*", .history) && !SMARTScopes("patient/Observation.rs").allows("*", .history))
        #expect(!SMARTScopes("patient/*.rs?category=laboratory").allows("*", .history, query: [("category", "laboratory")]))
    }
}
