import SMART

/// Resources a search's query brings into its results besides the matches: by `_include` and
/// `_revinclude` (with any modifier, `:iterate` among them) and by `_contained`. Their types
/// are not the path's, and a v2 restriction (`?category=`) filters only the matches, so each
/// needs a grant of its own with no restriction; a type the query does not name counts as
/// `"*"`, which only a wildcard grant allows. Parameter names are matched in any case: an
/// EHR that read them loosely would include.
struct FHIRInclusion: Equatable {
    /// How the query names the included resources' type.
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
    }

    /// The query parameter's name as the query gives it (`_include:iterate`). Never its value,
    /// which may hold PHI (an id), in a problem detail.
    let parameter: String
    let kind: Kind

    /// The type the launch's scopes must allow including: `"*"` unless the query names it.
    var type: String {
        if case let .named(type) = kind { type } else { "*" }
    }

    /// Every inclusion `query` asks for, in its order.
    static func all(in query: [(name: String, value: String)]) -> [FHIRInclusion] {
        query.compactMap { item in
            guard item.name.utf8.first == UInt8(ascii: "_") else { return nil }
            let kind: Kind
            switch item.name.prefix(while: { $0 != ":" }).lowercased() {
            case "_include": kind = FHIRInclusion.kind(of: item.value, reverse: false)
            case "_revinclude": kind = FHIRInclusion.kind(of: item.value, reverse: true)
            case "_contained" where item.value != "false": kind = .contained
            default: return nil
            }
            return FHIRInclusion(parameter: item.name, kind: kind)
        }
    }

    /// The first inclusion in `query` that `scopes` do not allow, if any.
    static func firstRefused(in query: [(name: String, value: String)], by scopes: SMARTScopes) -> FHIRInclusion? {
        all(in: query).first { !scopes.allows($0.type, .include) }
    }

    /// The detail of the 403 refusing this inclusion: what the front end can do about it.
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
        }
    }

    /// `Source:param[:Target]`: the included type is Source for `_revinclude`, Target for `_include`.
    private static func kind(of value: String, reverse: Bool) -> Kind {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3, FHIRInteraction.isResourceType(parts[0].utf8), !parts[1].isEmpty,
              parts.count == 2 || FHIRInteraction.isResourceType(parts[2].utf8)
        else { return .unparsed }
        if reverse { return .named(String(parts[0])) }
        return parts.count == 3 ? .named(String(parts[2])) : .untargeted
    }
}
