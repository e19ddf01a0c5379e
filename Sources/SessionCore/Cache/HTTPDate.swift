import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// HTTP dates (RFC 9110 §5.6.7): the IMF-fixdate form every server sends today
/// ("Sun, 06 Nov 1994 08:49:37 GMT") parsed and written as bytes, plus the two obsolete forms
/// (RFC 850, asctime) a recipient must accept when parsing.
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

    /// The date, or nil when `value` is no valid HTTP date.
    static func parse(_ value: String) -> Date? {
        // Split on spaces, commas and colons: every form then yields day, month, year and time
        // fields in a known order once the weekday is dropped.
        let tokens = value.split(whereSeparator: { $0 == " " || $0 == "," || $0 == ":" || $0 == "-" }).map(String.init)
        var day: Int?, month: Int?, year: Int?, hour: Int?, minute: Int?, second: Int?
        switch tokens.count {
        case 8 where tokens[7].uppercased() == "GMT":
            // IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" or RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT".
            day = Int(tokens[1]); month = monthIndex(tokens[2]); year = Int(tokens[3])
            hour = Int(tokens[4]); minute = Int(tokens[5]); second = Int(tokens[6])
            if let two = year, tokens[3].count == 2 { year = two < 50 ? 2000 + two : 1900 + two }
        case 7:
            // asctime "Sun Nov  6 08:49:37 1994".
            month = monthIndex(tokens[1]); day = Int(tokens[2])
            hour = Int(tokens[3]); minute = Int(tokens[4]); second = Int(tokens[5]); year = Int(tokens[6])
        default:
            return nil
        }
        guard let day, let month, let year, let hour, let minute, let second, (1...31).contains(day),
            (1600...9999).contains(year), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = timegm(&parts)
        return seconds == -1 ? nil : Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// The IMF-fixdate form of `date`.
    static func format(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let month = months[Int(parts.tm_mon)]
        return "\(weekdays[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(month.prefix(1).uppercased() + month.dropFirst()) "
            + "\(parts.tm_year + 1900) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    private static func monthIndex(_ token: String) -> Int? {
        months.firstIndex(of: token.lowercased())
    }
}
