import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// Checks that data is a well-formed XML document before a serializer hands it out.
///
/// swift-corelibs-foundation's `XMLParser.parse()` returns true for truncated documents (it
/// only sets `parserError`), and `XMLDocument(data:)` recovers from errors silently, so the
/// check collects every reported error and requires a root element.
enum XMLWellFormedness {
    /// The delegate that records errors and elements.
    private final class Recorder: NSObject, XMLParserDelegate {
        var firstError: (any Error)?
        var sawElement = false

        func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                    qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
            sawElement = true
        }

        func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
            if firstError == nil { firstError = parseError }
        }

        func parser(_ parser: XMLParser, validationErrorOccurred validationError: any Error) {
            if firstError == nil { firstError = validationError }
        }
    }

    /// The first problem found in `data`, nil when it is a well-formed document.
    /// External entities are never resolved.
    static func problem(in data: Data) -> (any Error)? {
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        let recorder = Recorder()
        parser.delegate = recorder
        let succeeded = parser.parse()
        parser.delegate = nil
        if let error = recorder.firstError ?? parser.parserError { return error }
        if !succeeded || !recorder.sawElement {
            return CocoaError(.propertyListReadCorrupt,
                              userInfo: ["NSDebugDescription": "Not an XML document (no root element)"])
        }
        return nil
    }
}
