import Foundation

/// The images the gallery shows: item `i` is `img/NNNN.EXT` under the base URL, the extension
/// cycling through PNG, JPEG, GIF and WebP. `serve.sh` generates exactly these files, each of a
/// solid colour derived from its index, so a test can tell from a screenshot which item a cell
/// shows.
struct Catalog: Sendable {
    static let extensions = ["png", "jpg", "gif", "webp"]

    let baseURL: URL
    let count: Int

    func url(for item: Int) -> URL {
        let number = String(item)
        let padded = String(repeating: "0", count: max(0, 4 - number.count)) + number
        let name = "\(padded).\(Self.extensions[item % Self.extensions.count])"
        return baseURL.appendingPathComponent("img").appendingPathComponent(name)
    }

    /// The button's image for a state name (`normal`, `highlighted`).
    func buttonURL(_ state: String) -> URL {
        baseURL.appendingPathComponent("button").appendingPathComponent("\(state).png")
    }
}
