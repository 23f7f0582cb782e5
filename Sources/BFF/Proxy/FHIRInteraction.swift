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
        var path = path // withUTF8 is mutating; a native string is not copied
        self = path.withUTF8 { FHIRInteraction(bytes: $0) }
    }

    /// Over the path's bytes, segments as ranges: a split of the UTF-8 view (a generic
    /// collection of arrays) took 1.4% of the proxy's CPU, and one by Characters 2.5%. The
    /// path is ASCII (`FHIRPath.problem` refused anything else).
    private init(bytes path: UnsafeBufferPointer<UInt8>) {
        // Split at the first four slashes, as the REST API's shapes need (the fifth segment
        // is the rest).
        var segments: [Range<Int>] = []
        segments.reserveCapacity(5)
        var start = 0
        for i in 0..<path.count where path[i] == UInt8(ascii: "/") && segments.count < 4 {
            segments.append(start..<i)
            start = i + 1
        }
        segments.append(start..<path.count)
        func segment(_ n: Int) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: path[segments[n]]) }
        if segments.indices.contains(where: { segment($0).first == UInt8(ascii: "$") }) { self = .operation; return }
        let count = segments.count
        guard FHIRInteraction.isResourceType(segment(0)) else {
            switch String(decoding: path, as: UTF8.self) {
            case "": self = .page
            case "metadata": self = .capabilities
            case "_history": self = .historySystem
            default: self = .other
            }
            return
        }
        let type = String(decoding: segment(0), as: UTF8.self)
        let isID = { FHIRInteraction.isID(segment($0)) }, isHistory = { FHIRInteraction.isHistory(segment($0)) }
        switch count {
        case 1:
            self = .searchType(type: type)
        case 2 where isHistory(1):
            self = .historyType(type: type)
        case 2 where isID(1):
            self = .read(type: type)
        case 3 where isID(1) && isHistory(2):
            self = .historyInstance(type: type)
        case 3 where isID(1) && FHIRInteraction.isResourceType(segment(2)):
            self = .searchType(type: String(decoding: segment(2), as: UTF8.self))
        case 4 where isID(1) && isHistory(2) && isID(3):
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

    /// Whether it reads given resources (and their versions), rather than searching or
    /// running an operation: AuditEventAction `R`, not `E`.
    var isRead: Bool {
        switch self {
        case .capabilities, .read, .vread, .historyInstance: true
        case .searchType, .historyType, .historySystem, .operation, .page, .other: false
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
    static func isResourceType(_ segment: some Collection<UInt8>) -> Bool {
        guard let first = segment.first, first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z") else { return false }
        return segment.allSatisfy(FHIRPath.isLetterOrDigit)
    }

    /// A resource id (FHIR: letters, digits, `-` and `.`), which no `_history` or `$op` is.
    private static func isID(_ segment: UnsafeBufferPointer<UInt8>) -> Bool {
        !segment.isEmpty && segment.allSatisfy { FHIRPath.isLetterOrDigit($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
    }

    private static func isHistory(_ segment: UnsafeBufferPointer<UInt8>) -> Bool {
        segment.elementsEqual("_history".utf8)
    }
}
