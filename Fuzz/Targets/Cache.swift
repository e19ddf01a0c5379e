import Foundation
import Serialization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Target: Cache-Control / Vary / Age / Expires / Date parsing and the freshness decision
// (Sources/SessionCore/Cache/CacheFreshness.swift, HTTPDate.swift). The first four bytes choose
// the status, the cache policy, shared or private, and the clocks; the first line is the
// request's Cache-Control, the rest are the response's header lines. Properties: lifetimes and
// ages are never negative or NaN; a date that parses formats to a string that parses to it.

private let policies: [URLRequest.CachePolicy] = [
    .useProtocolCachePolicy, .reloadIgnoringLocalCacheData, .returnCacheDataElseLoad,
    .returnCacheDataDontLoad, .reloadRevalidatingCacheData,
]
private let statuses = [200, 203, 204, 206, 301, 304, 404, 405, 410, 414, 500, 501]
private let base = Date(timeIntervalSince1970: 1_700_000_000)

private func checkDate(_ value: String) {
    guard let date = HTTPDate.parse(value) else { return }
    let text = HTTPDate.format(date)
    fuzzCheck(HTTPDate.parse(text) == date, "\(value.debugDescription) -> \(date) -> \(text) does not parse back")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCacheFreshness(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let status = statuses[Int(input.byte()) % statuses.count]
    let choice = input.byte()
    let policy = policies[Int(choice) % policies.count]
    let shared = choice & 0x80 != 0
    let pragma = choice & 0x40 != 0
    let requestDelay = TimeInterval(input.byte())
    let elapsed = TimeInterval(input.byte()) * 60
    let requestControl = input.string(until: 0x0A)
    var fields: [CachedResponse.Field] = []
    while !input.isEmpty, fields.count < 64 {
        let line = input.string(until: 0x0A)
        guard let colon = line.firstIndex(of: ":") else { continue }
        // Values as the response head parser hands them on: control bytes other than tab are
        // spaces (an entry is made from a parsed head, never from raw bytes).
        let raw = line[line.index(after: colon)...].unicodeScalars.map { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F ? " " : $0 }
        let value = String(String.UnicodeScalarView(raw)).trimmingCharacters(in: .whitespaces)
        fields.append(CachedResponse.Field(name: String(line[..<colon]), value: value))
    }
    let entry = CachedResponse(
        url: URL(string: "https://cache.invalid/")!, statusCode: status, httpVersion: "HTTP/1.1", fields: fields,
        body: Data(), requestDate: base, responseDate: base.addingTimeInterval(requestDelay), varyingRequestFields: [:])

    let responseDirectives = CacheFreshness.directives(entry.value(forHTTPHeaderField: "Cache-Control"))
    let requestDirectives = CacheFreshness.directives(requestControl)
    for name in responseDirectives.keys {
        fuzzCheck(!name.isEmpty && name == name.lowercased(), "directive name \(name.debugDescription)")
    }
    let explicit = CacheFreshness.hasExplicitFreshness(
        responseDirectives, expires: entry.value(forHTTPHeaderField: "Expires"))
    _ = CacheFreshness.isStorable(
        statusCode: status, response: responseDirectives, request: requestDirectives,
        vary: entry.value(forHTTPHeaderField: "Vary"), hasExplicitFreshness: explicit)
    let now = entry.responseDate.addingTimeInterval(elapsed)
    let lifetime = CacheFreshness.lifetime(of: entry, shared: shared)
    let age = CacheFreshness.age(of: entry, now: now)
    fuzzCheck(!lifetime.isNaN && lifetime >= 0, "lifetime \(lifetime)")
    fuzzCheck(!age.isNaN && age >= 0, "age \(age)")
    let decision = CacheFreshness.decide(
        entry: entry, policy: policy, requestDirectives: requestDirectives, pragmaNoCache: pragma, now: now,
        shared: shared)
    if decision == .revalidate {
        fuzzCheck(CacheFreshness.hasValidator(entry), "revalidate without a validator")
        for line in CacheFreshness.conditionalHeaderLines(for: entry) {
            fuzzCheck(!line.unicodeScalars.contains { $0 == "\r" || $0 == "\n" }, "conditional line \(line.debugDescription)")
        }
    }
    for field in fields { checkDate(field.value) }
    let head = HTTPResponseHead(url: entry.url, statusCode: 304, fields: fields.map { ($0.name, $0.value) })
    if CacheFreshness.notModified(head, describes: entry, callerRequest: nil) {
        let refreshed = CacheFreshness.refreshed(entry, with: head, requestDate: base, now: now)
        fuzzCheck(refreshed.body == entry.body, "refreshing changed the body")
    }
    return 0
}
