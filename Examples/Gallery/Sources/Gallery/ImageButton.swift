import CSDL2
import Foundation
import ImageLoading

/// A push button with one image per state, loaded through the `StatefulImageDisplaying`
/// binding (UIButton's normal and highlighted images). UI thread only, like ``GridCell``.
final class ImageButton: StatefulImageDisplaying {
    /// The button's states; highlighted while pressed.
    enum State: Hashable, Sendable {
        case normal
        case highlighted
    }

    private var images: [State: Image] = [:]
    private var textures: [State: OpaquePointer] = [:]
    private var stale: Set<State> = []

    /// Whether the button is held down (by the mouse or the script).
    var isHighlighted = false

    func setImage(_ image: Image?, for state: State) {
        images[state] = image
        stale.insert(state)
    }

    func setBackgroundImage(_ image: Image?, for state: State) {
        // This button draws no background; the binding requires the setter all the same.
    }

    /// Whether every state's image has arrived.
    var isLoaded: Bool { images[.normal] != nil && images[.highlighted] != nil }

    /// Draws the current state's image, falling back to the normal one (as UIButton does).
    func draw(in renderer: OpaquePointer, rect: SDL_Rect) {
        let state: State = isHighlighted && images[.highlighted] != nil ? .highlighted : .normal
        if stale.contains(state) {
            upload(state, renderer: renderer)
            stale.remove(state)
        }
        guard let texture = textures[state] else { return }
        var destination = rect
        SDL_RenderCopy(renderer, texture, nil, &destination)
    }

    /// Frees the textures (before the renderer goes away).
    func releaseTextures() {
        for texture in textures.values { SDL_DestroyTexture(texture) }
        textures = [:]
        stale = Set(images.keys)
    }

    private func upload(_ state: State, renderer: OpaquePointer) {
        if let old = textures.removeValue(forKey: state) { SDL_DestroyTexture(old) }
        guard let image = images[state], image.width > 0, image.height > 0,
              image.pixels.count == image.width * image.height * 4 else { return }
        guard let texture = SDL_CreateTexture(
            renderer, SDL_PIXELFORMAT_ABGR8888.rawValue, Int32(SDL_TEXTUREACCESS_STATIC.rawValue),
            Int32(image.width), Int32(image.height)) else { return }
        image.pixels.withUnsafeBytes { bytes in
            _ = SDL_UpdateTexture(texture, nil, bytes.baseAddress, Int32(image.width * 4))
        }
        textures[state] = texture
    }
}
