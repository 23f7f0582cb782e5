import Foundation

/// An instant to the microsecond, as PostgreSQL keeps a `timestamptz`: where an audit export
/// starts (`--since`) and where it stops (the `--since` of the next run). Exact, where a
/// `Date` (a Double of seconds) can land beside a stored value and skip or repeat a row.
public struct AuditInstant: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Microseconds since 1970-01-01T00:00:00Z.
    public var microsecondsSince1970: Int64

    public init(microsecondsSince1970: Int64) {
        self.microsecondsSince1970 = microsecondsSince1970
    }

    /// `date`, rounded down to the microsecond.
    public init(_ date: Date) {
        microsecondsSince1970 = Int64((date.timeIntervalSince1970 * 1_000_000).rounded(.down))
    }

    public var date: Date { Date(timeIntervalSince1970: Double(microsecondsSince1970) / 1_000_000) }

    public static func < (a: AuditInstant, b: AuditInstant) -> Bool { a.microsecondsSince1970 < b.microsecondsSince1970 }

    /// `instant` moved by `duration` (whole microseconds of it).
    public static func + (instant: AuditInstant, duration: Duration) -> AuditInstant {
        let (seconds, attoseconds) = duration.components
        return AuditInstant(microsecondsSince1970: instant.microsecondsSince1970 + seconds * 1_000_000 + attoseconds / 1_000_000_000_000)
    }

    public static func - (instant: AuditInstant, duration: Duration) -> AuditInstant { instant + (.zero - duration) }

    public var description: String { iso8601 }

    /// ISO 8601 in UTC with six fractional digits, as `--since` takes it back:
    /// `2026-11-25T16:40:00.123456Z`.
    public var iso8601: String {
        let (days, micros) = floorDivision(microsecondsSince1970, 86_400_000_000)
        let (year, month, day) = Self.civil(fromDays: days)
        let seconds = micros / 1_000_000
        func pad(_ n: Int64, _ width: Int) -> String {
            let digits = String(n.magnitude)
            return (n < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(seconds / 3600, 2)):\(pad(seconds / 60 % 60, 2)):\(pad(seconds % 60, 2))"
            + ".\(pad(micros % 1_000_000, 6))Z"
    }

    /// An ISO 8601 date and time with its zone, as `--since` takes it: the forms
    /// `ISO8601DateFormatter` reads (`2026-11-01T00:00:00Z`, `2026-11-01T01:00:00+01:00`), each
    /// also with a fraction of a second (`.5`, `.123456`); digits beyond the microsecond are
    /// dropped (rounded down). Nil for anything else.
    public init?(iso8601 text: String) {
        // The fraction is taken out and added exactly: the formatter reads whole seconds only
        // (and a Date would not keep every microsecond).
        var whole = text
        var fraction: Int64 = 0
        if let t = text.firstIndex(where: { $0 == "T" || $0 == "t" }), let dot = text[t...].firstIndex(of: ".") {
            let digits = text[text.index(after: dot)...].prefix(while: { $0.isASCII && $0.isNumber })
            guard !digits.isEmpty else { return nil }
            fraction = Int64(String(digits.prefix(6)).padding(toLength: 6, withPad: "0", startingAt: 0))!
            whole = String(text[..<dot] + text[digits.endIndex...])
        }
        // The formatter rolls an impossible date over (February 30th to March 2nd): refused.
        guard AuditInstant.hasValidCalendarFields(whole), let date = ISO8601DateFormatter().date(from: whole) else { return nil }
        self.init(microsecondsSince1970: Int64(date.timeIntervalSince1970.rounded()) * 1_000_000 + fraction)
    }

    /// Whether `YYYY-MM-DDThh:mm:ss…` names a real day and time (a leap second, :60, is let
    /// through for the formatter to judge).
    private static func hasValidCalendarFields(_ text: String) -> Bool {
        let digits = Array(text.utf8.prefix(19))
        guard digits.count == 19 else { return false }
        func number(_ range: Range<Int>) -> Int? {
            var n = 0
            for b in digits[range] { guard b >= 0x30, b <= 0x39 else { return nil }; n = n * 10 + Int(b - 0x30) }
            return n
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19) else { return false }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        // Then the zone and nothing else: Z, or an offset of at most 23:59 (RFC 3339 §5.6).
        let zone = Array(text.utf8.dropFirst(19))
        let zoneValid: Bool
        if zone == [UInt8(ascii: "Z")] || zone == [UInt8(ascii: "z")] {
            zoneValid = true
        } else if zone.count == 6, zone[0] == UInt8(ascii: "+") || zone[0] == UInt8(ascii: "-"), zone[3] == UInt8(ascii: ":"),
                  zone[1...2].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), zone[4...5].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            zoneValid = Int(zone[1] - 0x30) * 10 + Int(zone[2] - 0x30) <= 23 && zone[4] <= UInt8(ascii: "5")
        } else {
            zoneValid = false
        }
        return zoneValid && (1...12).contains(month) && (1...days[month - 1]).contains(day) && hour <= 23 && minute <= 59 && second <= 60
    }

    /// Year, month and day of the day `days` after 1970-01-01 (proleptic Gregorian; Howard
    /// Hinnant's `civil_from_days`).
    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// Quotient and remainder rounded towards minus infinity (the remainder is never negative).
private func floorDivision(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
    let (q, r) = a.quotientAndRemainder(dividingBy: b)
    return r < 0 ? (q - 1, r + b) : (q, r)
}
