/// Which image of a displaying object a download is for.
enum ImageSlot: Hashable, Sendable {
    /// The single image of an ``ImageDisplaying`` object.
    case image
    /// The image for one state of a ``StatefulImageDisplaying`` object.
    case stateImage(ImageStateKey)
    /// The background image for one state.
    case stateBackground(ImageStateKey)
}
