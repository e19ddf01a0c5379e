import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Target: resume-data decoding (`DownloadResumeData(encoded:)`, Sources/SessionCore/Download/
// DownloadResumeData.swift): the bytes a caller stored and hands back. Properties: accepted data
// re-encodes to data that decodes to the same value; the request it makes carries only header
// fields that can be sent; the validator is never empty, and never a weak entity tag.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResumeData(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Data(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    guard let resume = try? DownloadResumeData(encoded: bytes) else { return 0 }
    let again: DownloadResumeData
    do {
        again = try DownloadResumeData(encoded: resume.encoded())
    } catch {
        fuzzCheck(false, "re-encoded resume data is refused: \(error)")
        return 0
    }
    var expected = resume
    if resume.rangeFirst != nil || resume.rangeLast != nil { expected.version = max(resume.version, 2) }
    fuzzCheck(again == expected, "\(resume) became \(again)")
    let validator = resume.validator
    fuzzCheck(validator.map { !$0.isEmpty } ?? false, "validator \(String(describing: validator))")
    if let tag = resume.entityTag { fuzzCheck(!tag.hasPrefix("W/"), "resumable with the weak tag \(tag)") }
    let request = resume.request
    for (name, value) in request.allHTTPHeaderFields ?? [:] {
        fuzzCheck(
            !name.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == ":" })
                && !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }),
            "header \(name.debugDescription): \(value.debugDescription)")
    }
    return 0
}
