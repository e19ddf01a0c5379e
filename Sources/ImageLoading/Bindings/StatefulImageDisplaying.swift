import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Anything that shows an image and a background image per control state: a button of any UI
/// toolkit (AFNetworking's `UIButton+AFNetworking`). Conform your control type by giving it
/// the two setters; the loading methods come with the protocol.
///
/// Each state's image and background image load independently, with the same rules as
/// ``ImageDisplaying``: placeholders and cached images are set before the method returns,
/// downloaded ones on the chosen queue (main by default), and only if no later call for that
/// state replaced or cancelled the download. The control is held weakly.
public protocol StatefulImageDisplaying: ImageDownloaderProviding {
    /// A control state (normal, highlighted, disabled, …).
    associatedtype State: Hashable & Sendable

    /// Shows `image` (nil: none) for `state`.
    func setImage(_ image: Image?, for state: State)

    /// Shows `image` (nil: none) as the background for `state`.
    func setBackgroundImage(_ image: Image?, for state: State)
}

extension StatefulImageDisplaying {
    // MARK: Image

    /// Shows the image at `url` (requested with `Accept: image/*`) for `state`, with
    /// `placeholderImage` until it arrives.
    public func setImage(for state: State, with url: URL, placeholderImage: Image? = nil, on queue: DispatchQueue = .main) {
        setImage(for: state, withURLRequest: ImageLoad.request(for: url), placeholderImage: placeholderImage, on: queue)
    }

    /// Shows the image for `request` for `state`, with the rules of
    /// ``ImageDisplaying/setImage(withURLRequest:placeholderImage:success:failure:on:)``.
    /// With a `success` closure, setting the image is its job.
    public func setImage(
        for state: State,
        withURLRequest request: URLRequest,
        placeholderImage: Image? = nil,
        success: ImageDownloader.SuccessHandler? = nil,
        failure: ImageDownloader.FailureHandler? = nil,
        on queue: DispatchQueue = .main
    ) {
        load(request, for: state, background: false, placeholderImage, success, failure, queue)
    }

    /// Cancels the download of `state`'s image, if any.
    public func cancelImageDownloadTask(for state: State) {
        ImageLoad.cancel(self, .stateImage(ImageStateKey(state)))
    }

    // MARK: Background image

    /// Shows the image at `url` (requested with `Accept: image/*`) as `state`'s background,
    /// with `placeholderImage` until it arrives.
    public func setBackgroundImage(for state: State, with url: URL, placeholderImage: Image? = nil, on queue: DispatchQueue = .main) {
        setBackgroundImage(for: state, withURLRequest: ImageLoad.request(for: url), placeholderImage: placeholderImage, on: queue)
    }

    /// Shows the image for `request` as `state`'s background, with the rules of
    /// ``ImageDisplaying/setImage(withURLRequest:placeholderImage:success:failure:on:)``.
    /// With a `success` closure, setting the image is its job.
    public func setBackgroundImage(
        for state: State,
        withURLRequest request: URLRequest,
        placeholderImage: Image? = nil,
        success: ImageDownloader.SuccessHandler? = nil,
        failure: ImageDownloader.FailureHandler? = nil,
        on queue: DispatchQueue = .main
    ) {
        load(request, for: state, background: true, placeholderImage, success, failure, queue)
    }

    /// Cancels the download of `state`'s background image, if any.
    public func cancelBackgroundImageDownloadTask(for state: State) {
        ImageLoad.cancel(self, .stateBackground(ImageStateKey(state)))
    }

    /// Starts `state`'s image or background download through the type's shared downloader.
    private func load(
        _ request: URLRequest, for state: State, background: Bool, _ placeholderImage: Image?,
        _ success: ImageDownloader.SuccessHandler?, _ failure: ImageDownloader.FailureHandler?, _ queue: DispatchQueue
    ) {
        let key = ImageStateKey(state)
        ImageLoad.start(
            request, into: self, slot: background ? .stateBackground(key) : .stateImage(key), placeholder: placeholderImage,
            downloader: type(of: self).sharedImageDownloader, queue: queue, success: success, failure: failure,
            show: { owner, image in
                guard let control = owner as? any StatefulImageDisplaying else { return }
                showImage(image, in: control, for: state, background: background)
            })
    }
}

/// Calls the setter of `control` (its concrete type opened from the existential) when `state`
/// is of its `State` type.
private func showImage<Control: StatefulImageDisplaying, S: Hashable & Sendable>(
    _ image: Image?, in control: Control, for state: S, background: Bool
) {
    guard let state = state as? Control.State else { return }
    if background { control.setBackgroundImage(image, for: state) } else { control.setImage(image, for: state) }
}
