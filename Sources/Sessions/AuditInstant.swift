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

    /// An ISO 8601 date and time with its zone, as `--since` takes it (RFC 3339:
    /// `2026-11-01T00:00:00Z`, `2026-11-01T01:00:00+01:00`), each
    /// also with a fraction of a second (`.5`, `.123456`); digits beyond the microsecond are
    /// dropped (rounded down). Nil for anything else.
    public init?(iso8601 text: String) {
        // The fraction is taken out and added exactly (a Date would not keep every microsecond).
        // It comes right after the seconds (byte 19), and only a zone after it.
        var whole = text
        var fraction: Int64 = 0
        let bytes = Array(text.utf8)
        if bytes.count > 19, bytes[19] == UInt8(ascii: ".") {
            let digits = bytes[20...].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            guard !digits.isEmpty else { return nil }
            fraction = Int64(String(decoding: digits.prefix(6), as: UTF8.self).padding(toLength: 6, withPad: "0", startingAt: 0))!
            whole = String(decoding: bytes[..<19] + bytes[digits.endIndex...], as: UTF8.self)
        }
        // Read field by field: no date is rolled over (February 30th to March 2nd), and the
        // calendar is the proleptic Gregorian one `iso8601` prints (a formatter's switches to
        // the Julian before 1582).
        guard let seconds = AuditInstant.secondsSince1970(whole), seconds >= AuditInstant.firstSecondOfYear1 else { return nil }
        self.init(microsecondsSince1970: seconds * 1_000_000 + fraction)
    }

    /// 0001-01-01T00:00:00Z, in seconds since 1970: the trail's timestamps have no year 0.
    static let firstSecondOfYear1: Int64 = -62_135_596_800

    /// `YYYY-MM-DDThh:mm:ss` and a zone (`Z`, or an offset of at most 23:59, RFC 3339 §5.6)
    /// as seconds since 1970, if it names a real day and time (no leap second) and nothing
    /// follows the zone.
    private static func secondsSince1970(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
              bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":") else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var n: Int64 = 0
            for b in bytes[range] { guard b >= 0x30, b <= 0x39 else { return nil }; n = n * 10 + Int64(b - 0x30) }
            return n
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19) else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthLengths: [Int64] = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month), (1...monthLengths[Int(month) - 1]).contains(day), hour <= 23, minute <= 59, second <= 59 else {
            return nil
        }
        let zone = bytes[19...]
        var offset: Int64 = 0
        if zone.count == 1 && (zone.first == UInt8(ascii: "Z") || zone.first == UInt8(ascii: "z")) {
            offset = 0
        } else if zone.count == 6, zone.first == UInt8(ascii: "+") || zone.first == UInt8(ascii: "-"), bytes[22] == UInt8(ascii: ":"),
                  let hours = number(20..<22), let minutes = number(23..<25), hours <= 23, minutes <= 59 {
            offset = (hours * 3600 + minutes * 60) * (zone.first == UInt8(ascii: "-") ? -1 : 1)
        } else {
            return nil
        }
        return days(fromCivil: year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset
    }

    /// Days from 1970-01-01 to `year-month-day` (proleptic Gregorian; Howard Hinnant's
    /// `days_from_civil`).
    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
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
