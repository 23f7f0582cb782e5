import SMART

/// The FHIR RESTful interaction a `/fhir/{path}` read makes, by the shapes of the REST API.
/// The scope check asks it what the read needs (`access`), and the audit export names it
/// (`code`, a restful-interaction code). The query does not change it. For paths
/// `FHIRPath.problem` accepted (no empty segments).
enum FHIRInteraction: Equatable {
    /// `metadata`: the server's CapabilityStatement.
    case capabilities
    /// `T/id`.
    case read(type: String)
    /// `T/id/_history/vid`.
    case vread(type: String)
    /// `T/id/_history`.
    case historyInstance(type: String)
    /// `T/_history`.
    case historyType(type: String)
    /// `T`, and the compartment search `T/id/U`, whose results are Us (type U).
    case searchType(type: String)
    /// `_history` at the root.
    case historySystem
    /// `$op` anywhere in the path.
    case operation
    /// The EHR's base itself (an empty path): a page of search results, `?_getpages=…`
    /// (`FHIRPath.pageParameters`).
    case page
    /// Any other shape, system-level paths among them: its results may be of any type.
    case other

    init(path: String) {
        // Split on the UTF-8 bytes: a split by Characters (grapheme breaking) cost 2.5% of the
        // proxy's CPU. The path is ASCII (`FHIRPath.problem` refused anything else).
        let segments = path.utf8.split(separator: UInt8(ascii: "/"), maxSplits: 4, omittingEmptySubsequences: false)
        if segments.contains(where: { $0.first == UInt8(ascii: "$") }) { self = .operation; return }
        guard let first = segments.first, FHIRInteraction.isResourceType(first) else {
            switch path {
            case "": self = .page
            case "metadata": self = .capabilities
            case "_history": self = .historySystem
            default: self = .other
            }
            return
        }
        let type = String(Substring(first))
        let isID = FHIRInteraction.isID, isHistory = FHIRInteraction.isHistory
        switch segments.count {
        case 1:
            self = .searchType(type: type)
        case 2 where isHistory(segments[1]):
            self = .historyType(type: type)
        case 2 where isID(segments[1]):
            self = .read(type: type)
        case 3 where isID(segments[1]) && isHistory(segments[2]):
            self = .historyInstance(type: type)
        case 3 where isID(segments[1]) && FHIRInteraction.isResourceType(segments[2]):
            self = .searchType(type: String(Substring(segments[2])))
        case 4 where isID(segments[1]) && isHistory(segments[2]) && isID(segments[3]):
            self = .vread(type: type)
        default:
            self = .other
        }
    }

    /// What the read asks of the launch's scopes.
    enum Access: Equatable {
        /// Nothing: the CapabilityStatement is public by the spec.
        case open
        /// `interaction` on resources of `type`; `"*"` when the results are not of one type,
        /// which only a wildcard scope (`patient/*.rs`, `user/*.read`) grants.
        case resources(type: String, interaction: SMARTScopes.Interaction)
        /// A search grant for any type: a page after the first of a search, which names the
        /// search only by the EHR's id, so its type is not known here. That id is bound to
        /// this launch (`PageBinding`), whose search was checked when its first page was read.
        case someSearch
    }

    var access: Access {
        switch self {
        case .capabilities: .open
        case let .read(type), let .vread(type), let .historyInstance(type): .resources(type: type, interaction: .read)
        case let .searchType(type): .resources(type: type, interaction: .search)
        // History takes no search parameters: a `?category=` in its query restricts nothing.
        case let .historyType(type): .resources(type: type, interaction: .history)
        case .historySystem: .resources(type: "*", interaction: .history)
        case .operation: .resources(type: "*", interaction: .operation)
        case .other: .resources(type: "*", interaction: .search)
        case .page: .someSearch
        }
    }

    /// Its code in http://hl7.org/fhir/restful-interaction (an unknown shape counts as a
    /// system-level search; a page, of a search of unknown type, is the general `search`).
    var code: String {
        switch self {
        case .capabilities: "capabilities"
        case .read: "read"
        case .vread: "vread"
        case .historyInstance: "history-instance"
        case .historyType: "history-type"
        case .searchType: "search-type"
        case .historySystem: "history-system"
        case .operation: "operation"
        case .other: "search-system"
        case .page: "search"
        }
    }

    /// A resource type's name: a capital letter, then letters and digits.
    static func isResourceType(_ segment: Substring.UTF8View) -> Bool {
        guard let first = segment.first, first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z") else { return false }
        return segment.allSatisfy(FHIRPath.isLetterOrDigit)
    }

    /// A resource id (FHIR: letters, digits, `-` and `.`), which no `_history` or `$op` is.
    private static func isID(_ segment: Substring.UTF8View) -> Bool {
        !segment.isEmpty && segment.allSatisfy { FHIRPath.isLetterOrDigit($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
    }

    private static func isHistory(_ segment: Substring.UTF8View) -> Bool {
        segment.elementsEqual("_history".utf8)
    }
}
