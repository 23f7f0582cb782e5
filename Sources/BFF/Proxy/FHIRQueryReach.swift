import SMART

/// Resources of other types than the matches that a search's query reaches: ones it brings
/// into the results (`_include`, `_revinclude`, with any modifier such as `:iterate`, and
/// `_contained`), and ones whose data its filters read (`_has` reverse chains, chained
/// parameters such as `subject:Patient.name`, `_filter`). A `_has` filter tells whether a
/// matching resource of its type exists (`Patient?_has:Condition:subject:code=…`), which is
/// reading that type. A v2 restriction (`?category=`) applies to the matches only, so each
/// of these needs a grant of its own with no restriction; a type the query does not name
/// counts as `"*"`, which only a wildcard grant allows. Parameter names are matched in any
/// case: an EHR that read them loosely would include.
struct FHIRQueryReach: Equatable {
    /// How the query names the reached resources' type.
    enum Kind: Equatable {
        /// `_revinclude=Source:param[:Target]` (type Source) or `_include=Source:param:Target`
        /// (type Target).
        case named(String)
        /// `_include=Source:param`: whatever type the references point at.
        case untargeted
        /// `*`, or a value not of the form `Source:param[:Target]`.
        case unparsed
        /// `_contained` with any value but `false`: contained resources of any type.
        case contained
        /// A filter on the data of this type: `_has:Type:…`, or a chained parameter's link
        /// `param:Type.…`.
        case filtered(String)
        /// A filter on the data of resources of any type: a chained parameter's link that names
        /// no type (`subject.name`), a `_has` not of the form `_has:Type:param:…`, `_filter`.
        case filteredUntyped
    }

    /// The query parameter's name as the query gives it (`_include:iterate`). Never its value,
    /// which may hold PHI (an id), in a problem detail.
    let parameter: String
    let kind: Kind

    /// The type the launch's scopes must allow: `"*"` unless the query names it.
    var type: String {
        switch kind {
        case let .named(type), let .filtered(type): type
        default: "*"
        }
    }

    /// What the launch's scopes must allow on `type`.
    var interaction: SMARTScopes.Interaction {
        switch kind {
        case .filtered, .filteredUntyped: .filter
        default: .include
        }
    }

    /// Everything `query` reaches besides its matches, in its order.
    static func all(in query: [(name: String, value: String)]) -> [FHIRQueryReach] {
        query.flatMap { item in
            reached(byParameter: item.name, value: item.value).map { FHIRQueryReach(parameter: item.name, kind: $0) }
        }
    }

    /// The first reach in `query` that `scopes` do not allow, if any.
    static func firstRefused(in query: [(name: String, value: String)], by scopes: SMARTScopes) -> FHIRQueryReach? {
        all(in: query).first { !scopes.allows($0.type, $0.interaction) }
    }

    /// The detail of the 403 refusing this reach: what the front end can do about it.
    var refusal: String {
        let wildcard = "which needs a wildcard scope such as patient/*.rs with no restriction"
        return switch kind {
        case let .named(type):
            "The launch's scopes do not allow including \(type) (through \(parameter)): included resources need a read or search"
                + " scope for their type with no restriction such as ?category=."
        case .untargeted:
            "The launch's scopes do not allow including resources of any type (through \(parameter) with no target type), \(wildcard):"
                + " name the target type, as in _include=MedicationRequest:medication:Medication."
        case .unparsed:
            "The launch's scopes do not allow including resources of any type (through \(parameter) with * or a value not of the"
                + " form Source:param:Target), \(wildcard)."
        case .contained:
            "The launch's scopes do not allow contained resources of any type (through \(parameter)), \(wildcard)."
        case let .filtered(type):
            "The launch's scopes do not allow filtering on \(type) data (through \(parameter)): that needs a search scope for"
                + " \(type) with no restriction such as ?category=."
        case .filteredUntyped:
            "The launch's scopes do not allow filtering on the data of resources of any type (through \(parameter), which names"
                + " no type), \(wildcard): name the type, as in subject:Patient.name."
        }
    }

    /// What one parameter reaches.
    private static func reached(byParameter name: String, value: String) -> [Kind] {
        if name.utf8.first == UInt8(ascii: "_") {
            switch name.prefix(while: { $0 != ":" }).lowercased() {
            case "_include": return [kind(of: value, reverse: false)]
            case "_revinclude": return [kind(of: value, reverse: true)]
            case "_contained" where value != "false": return [.contained]
            case "_has": return reverseChain(name.split(separator: ":", omittingEmptySubsequences: false).dropFirst())
            case "_filter": return [.filteredUntyped] // an expression that may chain anywhere
            default: break
            }
        }
        return chain(Substring(name))
    }

    /// `_include=Source:param[:Target]`: the included type is Source for `_revinclude`,
    /// Target for `_include`.
    private static func kind(of value: String, reverse: Bool) -> Kind {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3, FHIRInteraction.isResourceType(parts[0].utf8), !parts[1].isEmpty,
              parts.count == 2 || FHIRInteraction.isResourceType(parts[2].utf8)
        else { return .unparsed }
        if reverse { return .named(String(parts[0])) }
        return parts.count == 3 ? .named(String(parts[2])) : .untargeted
    }

    /// The rest of `_has:Type:reference:param` after `_has`, where `param` may be another
    /// `_has:…` or a chained parameter: each Type, then what `param` reaches.
    private static func reverseChain(_ parts: ArraySlice<Substring>) -> [Kind] {
        guard parts.count >= 3, FHIRInteraction.isResourceType(parts[parts.startIndex].utf8),
              !parts[parts.startIndex + 1].isEmpty, !parts[parts.startIndex + 2].isEmpty
        else { return [.filteredUntyped] }
        let type = Kind.filtered(String(parts[parts.startIndex]))
        let param = parts[(parts.startIndex + 2)...]
        if param.first!.lowercased() == "_has" { return [type] + reverseChain(param.dropFirst()) }
        return [type] + chain(Substring(param.joined(separator: ":")))
    }

    /// A chained parameter, `reference[:Type].…param`: each link but the last reaches the
    /// type its reference points at (named by `:Type`, or any). A link that is a reverse chain
    /// (`subject:Patient._has:Condition:subject:code`, which HAPI FHIR takes) reaches what
    /// `reverseChain` says, with the links after it. Nothing for a plain parameter.
    private static func chain(_ name: Substring) -> [Kind] {
        guard name.contains(".") else { return [] }
        let links = name.split(separator: ".", omittingEmptySubsequences: false)
        var reached: [Kind] = []
        for (index, link) in links.enumerated() {
            let parts = link.split(separator: ":", omittingEmptySubsequences: false)
            if parts[0].lowercased() == "_has" {
                let rest = links[index...].joined(separator: ".")
                return reached + reverseChain(rest.split(separator: ":", omittingEmptySubsequences: false).dropFirst())
            }
            guard index < links.count - 1 else { break }
            guard parts.count == 2, !parts[0].isEmpty, FHIRInteraction.isResourceType(parts[1].utf8) else {
                reached.append(.filteredUntyped)
                continue
            }
            reached.append(.filtered(String(parts[1])))
        }
        return reached
    }
}
