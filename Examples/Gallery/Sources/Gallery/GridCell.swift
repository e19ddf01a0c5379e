import CSDL2
import Foundation
import ImageLoading
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One square of the grid, reused as the grid scrolls (a table view's cell): it shows whichever
/// item it was handed last, through the `ImageDisplaying` binding.
///
/// Lives on the UI thread only: the binding delivers images on the main queue, which the UI
/// thread drains between frames, and SDL's renderer must only be touched from that thread.
final class GridCell: ImageDisplaying {
    /// The binding sets this: the placeholder at once, the downloaded image when it arrives.
    /// Only the pixels are kept here; the texture upload waits for the next frame, so that the
    /// setter stays cheap and SDL is called from the render path alone.
    var image: Image? {
        didSet { needsUpload = true }
    }

    /// The item this cell shows now (nil: never used yet).
    private(set) var item: Int?

    /// The image the cell shows until its own arrives; compared to tell "loaded" from "waiting".
    private let placeholder: Image
    private var texture: OpaquePointer?
    private var textureSize = (width: 0, height: 0)
    private var needsUpload = false

    init(placeholder: Image) {
        self.placeholder = placeholder
    }

    /// Whether the cell shows its own item's image (not the placeholder, not nothing).
    var isLoaded: Bool {
        guard let image else { return false }
        return image != placeholder
    }

    /// Hands the cell another item (reuse). The binding cancels the download of the previous
    /// URL before it starts this one, so a late response for the old item is dropped and can
    /// never be drawn here: that is what keeps a fast scroll from showing stale pictures.
    func show(item: Int, url: URL) {
        guard item != self.item else { return }
        self.item = item
        setImage(
            withURLRequest: URLRequest(url: url), placeholderImage: placeholder,
            failure: { request, response, error in
                // Recorded, so that a script waiting for this image stops at once and says why
                // instead of running into its timeout. A cancelled download never gets here.
                let status = response.map { " (HTTP \($0.statusCode))" } ?? ""
                LoadFailures.record("\(request.url?.absoluteString ?? "?")\(status): \(error)")
            })
    }

    /// Draws the image scaled into `rect`, uploading new pixels first.
    func draw(in renderer: OpaquePointer, rect: SDL_Rect) {
        guard let image else { return }
        if needsUpload {
            upload(image, renderer: renderer)
            needsUpload = false
        }
        guard let texture else { return }
        var destination = rect
        SDL_RenderCopy(renderer, texture, nil, &destination)
    }

    /// Frees the texture (before the renderer goes away).
    func releaseTexture() {
        if let texture { SDL_DestroyTexture(texture) }
        texture = nil
        textureSize = (0, 0)
    }

    /// Copies `image`'s RGBA pixels into the cell's texture, recreating it when the size changed.
    private func upload(_ image: Image, renderer: OpaquePointer) {
        // An image whose pixel buffer disagrees with its size would make SDL read past the end.
        guard image.width > 0, image.height > 0, image.pixels.count == image.width * image.height * 4 else {
            releaseTexture()
            return
        }
        if texture == nil || textureSize != (image.width, image.height) {
            releaseTexture()
            // ABGR8888 is "R, G, B, A bytes in memory" on a little-endian machine: Image's layout.
            texture = SDL_CreateTexture(
                renderer, SDL_PIXELFORMAT_ABGR8888.rawValue, Int32(SDL_TEXTUREACCESS_STATIC.rawValue),
                Int32(image.width), Int32(image.height))
            textureSize = (image.width, image.height)
        }
        guard let texture else { return }
        image.pixels.withUnsafeBytes { bytes in
            _ = SDL_UpdateTexture(texture, nil, bytes.baseAddress, Int32(image.width * 4))
        }
    }
}
