@testable import BFF
import SMART
import Testing

/// What the launch's scopes allow beyond a plain read or search: type history, and the
/// resources a search brings in besides its matches.
@Suite("scope checks: history and included resources")
struct ScopeCheckTests {
    static let laboratory = "patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory"

    @Test("a refresh's scope is kept only within the launch's: the same or less, never more, however the EHR writes it (RFC 6749 §6)",
          arguments: [
              // The same, and the same written as a wildcard: the launch's scopes.
              ("openid patient/Patient.rs patient/Observation.rs", "openid patient/Patient.rs patient/Observation.rs"),
              ("openid patient/*.rs", "openid patient/Patient.rs patient/Observation.rs"),
              // Narrower: what is left.
              ("openid patient/Patient.rs", "openid patient/Patient.rs"),
              ("patient/Observation.r", "patient/Observation.r"),
              ("patient/Observation.rs?category=laboratory", "patient/Observation.rs?category=laboratory"),
              // Wider: nothing beyond the launch's.
              ("openid launch patient/*.rs user/*.cruds system/Condition.read", "openid patient/Patient.rs patient/Observation.rs"),
              ("patient/Condition.rs offline_access", ""),
              // Another context or more permissions are more, whatever the proxy enforces.
              ("system/*.cruds user/*.rs patient/Patient.cruds", "patient/Patient.rs"),
              ("patient/*.*", "patient/Patient.rs patient/Observation.rs"),
          ])
    func refreshScopeNarrowed(granted: String, kept: String) {
        #expect(SMARTScopes.narrowed(granted, within: "openid patient/Patient.rs patient/Observation.rs") == kept)
    }

    @Test("a restricted launch scope stays restricted when the refresh answers without the restriction")
    func refreshKeepsRestriction() {
        #expect(SMARTScopes.narrowed("patient/Observation.rs", within: ScopeCheckTests.laboratory) == ScopeCheckTests.laboratory)
        #expect(SMARTScopes.narrowed("patient/*.read", within: "patient/Observation.r") == "patient/Observation.r")
        // The launch's default, a wildcard: a refresh's write and system scopes stay out.
        #expect(SMARTScopes.narrowed("launch/patient openid fhirUser patient/*.rs user/*.cruds system/*.read offline_access",
                                     within: "launch/patient openid fhirUser patient/*.rs offline_access")
                    == "launch/patient openid fhirUser patient/*.rs offline_access")
    }

    @Test("Epic's forms: v1 permissions in any case, and scopes with no context whose type is a FHIR type name; nothing else new")
    func epicForms() {
        let capitalised = SMARTScopes("user/RelatedPerson.Read patient/Observation.WRITE")
        #expect(capitalised.allows("RelatedPerson", .read) && capitalised.allows("RelatedPerson", .search))
        #expect(!capitalised.allows("Observation", .read))
        let bare = SMARTScopes("openid Patient.read Condition.search")
        #expect(bare.allows("Patient", .read) && bare.allows("Patient", .search))
        #expect(bare.allows("Condition", .search) && !bare.allows("Condition", .read) && !bare.allows("Observation", .read))
        // v2 letters stay lower case; a context-free scope needs a type name (no wildcard, no
        // lower case), a v1 word and no restriction. Each is checked against the type it names.
        let refused: [(scope: String, type: String)] = [
            ("patient/Observation.RS", "Observation"), ("*.read", "*"), ("patient.read", "patient"), ("fhir.read", "fhir"),
            ("Observation.rs", "Observation"), ("Observation.read?category=laboratory", "Observation"),
            ("Patient.Foo.read", "Patient.Foo"), ("Patient.Foo.read", "Patient"), ("launch/patient", "Patient"), ("openid", "Patient"),
        ]
        for (scope, type) in refused {
            let scopes = SMARTScopes(scope)
            #expect(!scopes.allows(type, .read) && !scopes.allows(type, .search), "\(scope) allows \(type)")
        }
        // A refresh's answer in Epic's form is within the launch's grant written either way,
        // and a wider one is not.
        #expect(SMARTScopes.narrowed("Patient.read user/Observation.Read", within: "Patient.read user/Observation.read")
                    == "Patient.read user/Observation.Read user/Observation.read")
        #expect(SMARTScopes.narrowed("Patient.read Observation.read", within: "Patient.search") == "Patient.search")
        // One grant written with and without a context, either way round: the scope with the
        // context is kept (no read the launch had is lost), the one without is not (it is wider).
        #expect(SMARTScopes.narrowed("Patient.read", within: "patient/Patient.read") == "patient/Patient.read")
        #expect(SMARTScopes.narrowed("patient/Patient.read", within: "Patient.read") == "patient/Patient.read")
        #expect(SMARTScopes.narrowed("Patient.read", within: "patient/Observation.read") == "")
        #expect(SMARTScopes.narrowed("user/Patient.read", within: "Patient.search") == "")
    }

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

    @Test("an operation ($everything) needs a wildcard grant with no restriction: its parameters are not search filters")
    func operations() {
        #expect(SMARTScopes("patient/*.rs").allows("*", .operation) && SMARTScopes("user/*.read").allows("*", .operation))
        #expect(!SMARTScopes("patient/*.rs?category=laboratory").allows("*", .operation, query: [("category", "laboratory")]))
        #expect(!SMARTScopes("patient/Patient.rs patient/Observation.rs").allows("*", .operation))
    }
}

@Suite("scope checks: resources a query includes")
struct IncludedResourceScopeTests {
    typealias Query = [(name: String, value: String)]

    static let patientOnly = SMARTScopes("launch/patient openid fhirUser patient/Patient.rs")

    /// Whether a query on a launch with `scope` is let through by the inclusion check.
    static func allowed(_ scope: String, _ query: Query) -> Bool {
        FHIRQueryReach.firstRefused(in: query, by: SMARTScopes(scope)) == nil
    }

    @Test("the type each parameter includes: Source for _revinclude, Target for _include, * when the query does not name it")
    func types() {
        let query: Query = [
            ("_revinclude", "Observation:patient"), ("_revinclude", "Provenance:target:Patient"),
            ("_include", "MedicationRequest:medication:Medication"), ("_include", "Observation:patient"),
            ("_include:iterate", "Observation:has-member:Observation"), ("_revinclude:iterate", "Observation:derived-from"),
            ("_include:recurse", "Patient:link:Patient"),
            ("_include", "*"), ("_revinclude", "*"), ("_include", "Observation"), ("_include", "observation:patient:Patient"),
            ("_include", "Observation:patient:Patient:x"), ("_include", "Observation::Patient"), ("_include", "Observation:patient:Patient,Group"),
            ("_contained", "true"), ("_contained", "both"), ("_contained", "false"),
            ("_INCLUDE", "Observation:patient:Patient"), ("patient", "Observation:patient:Patient"), ("_containedType", "contained"),
        ]
        let expected: [(String, FHIRQueryReach.Kind)] = [
            ("_revinclude", .named("Observation")), ("_revinclude", .named("Provenance")),
            ("_include", .named("Medication")), ("_include", .untargeted),
            ("_include:iterate", .named("Observation")), ("_revinclude:iterate", .named("Observation")),
            ("_include:recurse", .named("Patient")),
            ("_include", .unparsed), ("_revinclude", .unparsed), ("_include", .unparsed), ("_include", .unparsed),
            ("_include", .unparsed), ("_include", .unparsed), ("_include", .unparsed),
            ("_contained", .contained), ("_contained", .contained),
            ("_INCLUDE", .named("Patient")),
        ]
        let found = FHIRQueryReach.all(in: query)
        #expect(found == expected.map { FHIRQueryReach(parameter: $0.0, kind: $0.1) })
        #expect(found.map(\.type) == expected.map { if case let .named(type) = $0.1 { type } else { "*" } })
    }

    @Test("_revinclude of a type the launch was not granted is refused; of a granted type it is allowed")
    func revinclude() {
        let scope = "launch/patient openid fhirUser patient/Patient.rs"
        #expect(!IncludedResourceScopeTests.allowed(scope, [("_id", "pat-1"), ("_revinclude", "Observation:patient")]))
        #expect(IncludedResourceScopeTests.allowed(scope + " patient/Observation.rs", [("_revinclude", "Observation:patient")]))
        #expect(IncludedResourceScopeTests.allowed(scope + " patient/Observation.read", [("_revinclude", "Observation:subject:Patient")]))
        // Read alone or search alone is enough; neither is not.
        #expect(IncludedResourceScopeTests.allowed(scope + " patient/Observation.r", [("_revinclude", "Observation:patient")]))
        #expect(IncludedResourceScopeTests.allowed(scope + " patient/Observation.s", [("_revinclude", "Observation:patient")]))
        #expect(!IncludedResourceScopeTests.allowed(scope + " patient/Observation.c", [("_revinclude", "Observation:patient")]))
    }

    @Test("_include with a target type needs that type; without one it needs a wildcard grant")
    func include() {
        let scope = "patient/MedicationRequest.rs"
        #expect(IncludedResourceScopeTests.allowed(scope + " patient/Medication.rs", [("_include", "MedicationRequest:medication:Medication")]))
        #expect(!IncludedResourceScopeTests.allowed(scope + " patient/Medication.rs", [("_include", "MedicationRequest:requester:Practitioner")]))
        #expect(!IncludedResourceScopeTests.allowed(scope + " patient/Medication.rs", [("_include", "MedicationRequest:medication")]))
        #expect(IncludedResourceScopeTests.allowed("patient/*.rs", [("_include", "MedicationRequest:medication")]))
        #expect(IncludedResourceScopeTests.allowed("user/*.read", [("_include", "*"), ("_revinclude", "*")]))
        #expect(!IncludedResourceScopeTests.allowed(scope + " patient/Medication.rs", [("_include", "*")]))
    }

    @Test("a modifier (:iterate, :recurse) changes nothing: the included type is judged the same")
    func modifiers() {
        let scope = "patient/Observation.rs"
        #expect(!IncludedResourceScopeTests.allowed(scope, [("_include:iterate", "Observation:has-member:Observation"),
                                                            ("_revinclude:iterate", "Provenance:target")]))
        #expect(!IncludedResourceScopeTests.allowed(scope, [("_include:iterate", "Observation:subject")]))
        #expect(!IncludedResourceScopeTests.allowed(scope, [("_include:recurse", "Observation:patient:Patient")]))
        #expect(IncludedResourceScopeTests.allowed(scope, [("_include:iterate", "Observation:has-member:Observation")]))
    }

    @Test("_contained other than false needs a wildcard grant with no restriction")
    func contained() {
        #expect(!IncludedResourceScopeTests.allowed("patient/Observation.rs", [("_contained", "true")]))
        #expect(!IncludedResourceScopeTests.allowed("patient/Observation.rs", [("_contained", "both")]))
        #expect(IncludedResourceScopeTests.allowed("patient/Observation.rs", [("_contained", "false")]))
        #expect(IncludedResourceScopeTests.allowed("patient/*.rs", [("_contained", "true")]))
        #expect(!IncludedResourceScopeTests.allowed("patient/*.rs?category=laboratory", [("_contained", "true"), ("category", "laboratory")]))
    }

    @Test("a restricted grant for the included type does not count, even with its category in the query")
    func restricted() {
        let scope = "patient/Patient.rs " + ScopeCheckTests.laboratory
        #expect(!IncludedResourceScopeTests.allowed(scope, [("_revinclude", "Observation:patient"), ("category", "laboratory")]))
        #expect(!IncludedResourceScopeTests.allowed("patient/Patient.rs patient/*.rs?category=laboratory",
                                                    [("_include", "Observation:patient"), ("category", "laboratory")]))
        // An unrestricted grant beside the restricted one does.
        #expect(IncludedResourceScopeTests.allowed(scope + " patient/Observation.r", [("_revinclude", "Observation:patient")]))
    }

    @Test("the types _has, chained parameters and _filter filter on: named, or any")
    func filters() {
        let query: Query = [
            ("_has:Observation:patient:code", "1234-5"), ("_HAS:Condition:subject:_has:Observation:focus:code:text", "x"),
            ("_has:Observation:patient:subject:Patient.name", "x"), ("_has:Observation", "x"), ("_has:observation:patient:code", "x"),
            ("subject:Patient._has:Condition:subject:code", "x"), ("subject._HAS:Observation:subject:patient:Patient.name", "x"),
            ("subject:Patient.name", "x"), ("subject.name", "x"), ("organization:Organization.partof:Organization.name:exact", "x"),
            ("_filter", "name eq x"), ("code:text", "x"), ("value-quantity", "5.4|http://unitsofmeasure.org|mg"),
        ]
        let expected: [(String, FHIRQueryReach.Kind)] = [
            ("_has:Observation:patient:code", .filtered("Observation")),
            ("_HAS:Condition:subject:_has:Observation:focus:code:text", .filtered("Condition")),
            ("_HAS:Condition:subject:_has:Observation:focus:code:text", .filtered("Observation")),
            ("_has:Observation:patient:subject:Patient.name", .filtered("Observation")),
            ("_has:Observation:patient:subject:Patient.name", .filtered("Patient")),
            ("_has:Observation", .filteredUntyped), ("_has:observation:patient:code", .filteredUntyped),
            ("subject:Patient._has:Condition:subject:code", .filtered("Patient")),
            ("subject:Patient._has:Condition:subject:code", .filtered("Condition")),
            ("subject._HAS:Observation:subject:patient:Patient.name", .filteredUntyped),
            ("subject._HAS:Observation:subject:patient:Patient.name", .filtered("Observation")),
            ("subject._HAS:Observation:subject:patient:Patient.name", .filtered("Patient")),
            ("subject:Patient.name", .filtered("Patient")), ("subject.name", .filteredUntyped),
            ("organization:Organization.partof:Organization.name:exact", .filtered("Organization")),
            ("organization:Organization.partof:Organization.name:exact", .filtered("Organization")),
            ("_filter", .filteredUntyped),
        ]
        #expect(FHIRQueryReach.all(in: query) == expected.map { FHIRQueryReach(parameter: $0.0, kind: $0.1) })
    }

    @Test("a filter on another type needs a search grant on it with no restriction; an untyped one, a wildcard grant")
    func filterGrants() {
        let scope = "patient/Patient.rs"
        #expect(!IncludedResourceScopeTests.allowed(scope, [("_has:Observation:patient:code", "1234-5")]))
        #expect(IncludedResourceScopeTests.allowed(scope + " patient/Observation.rs", [("_has:Observation:patient:code", "1234-5")]))
        #expect(IncludedResourceScopeTests.allowed(scope + " patient/Observation.s", [("_has:Observation:patient:code", "1234-5")]))
        // Reading one Observation by id is not searching them.
        #expect(!IncludedResourceScopeTests.allowed(scope + " patient/Observation.r", [("_has:Observation:patient:code", "1234-5")]))
        // A restricted grant does not count, even with its category in the filter.
        #expect(!IncludedResourceScopeTests.allowed(scope + " " + ScopeCheckTests.laboratory,
                                                    [("_has:Observation:patient:category", "laboratory")]))
        #expect(!IncludedResourceScopeTests.allowed(ScopeCheckTests.laboratory, [("derived-from:Observation.category", "social-history")]))
        #expect(IncludedResourceScopeTests.allowed("patient/Observation.rs", [("derived-from:Observation.category", "social-history")]))
        #expect(!IncludedResourceScopeTests.allowed(scope + " patient/Practitioner.rs", [("general-practitioner.name", "x")]))
        #expect(IncludedResourceScopeTests.allowed(scope + " patient/Practitioner.rs", [("general-practitioner:Practitioner.name", "x")]))
        #expect(IncludedResourceScopeTests.allowed("patient/*.rs", [("general-practitioner.name", "x"), ("_filter", "x")]))
        #expect(IncludedResourceScopeTests.allowed(scope, [("name:exact", "x"), ("birthdate", "ge2000-01-01")]))
    }

    @Test("the refusal tells the front end what to do, and never echoes a value")
    func refusals() throws {
        let scopes = IncludedResourceScopeTests.patientOnly
        let revinclude = try #require(FHIRQueryReach.firstRefused(in: [("_revinclude", "Observation:patient")], by: scopes))
        #expect(revinclude.refusal.hasPrefix("The launch's scopes do not allow including Observation (through _revinclude)"))
        let untargeted = try #require(FHIRQueryReach.firstRefused(in: [("_include", "Patient:general-practitioner")], by: scopes))
        #expect(untargeted.refusal.contains("name the target type, as in _include=MedicationRequest:medication:Medication"))
        #expect(!untargeted.refusal.contains("general-practitioner"))
        let contained = try #require(FHIRQueryReach.firstRefused(in: [("_contained", "true")], by: scopes))
        #expect(contained.refusal.contains("wildcard scope such as patient/*.rs"))
    }
}
