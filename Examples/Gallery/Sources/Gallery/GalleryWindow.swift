import CSDL2
import Foundation
import ImageLoading

/// An SDL window showing the catalog as a scrolling grid of reused cells, with a button above.
///
/// Everything here runs on the UI thread (the process's main thread). Images arrive through
/// the bindings on the main dispatch queue, which ``pumpFrame(waitingUpTo:)`` drains between
/// frames: downloads and decodes happen on Curlew's threads, the UI thread only copies decoded
/// pixels into textures.
final class GalleryWindow {
    enum StartError: Error, CustomStringConvertible {
        case sdl(String)
        var description: String {
            switch self {
            case .sdl(let message): "SDL: \(message)"
            }
        }
    }

    let layout = GridLayout()
    let catalog: Catalog
    /// The first visible row; the grid scrolls by whole rows.
    private(set) var firstRow = 0
    /// Every item ever handed to a cell, in order (the test compares it with the server's log).
    private(set) var assignedItems: [Int] = []
    let button = ImageButton()
    /// Set when the window was asked to close.
    private(set) var quitRequested = false

    private let window: OpaquePointer
    private let renderer: OpaquePointer
    /// One cell per visible slot, reused: the cell for item `i` is `cells[i % cells.count]`,
    /// so a row scrolling out at the top is the row scrolling in at the bottom.
    private let cells: [GridCell]
    private let prefetcher: ImagePrefetcher
    private var prefetchedItems: Set<Int> = []

    init(catalog: Catalog, downloader: ImageDownloader) throws {
        self.catalog = catalog
        let placeholder = try Self.makePlaceholder()
        guard SDL_Init(SDL_INIT_VIDEO) == 0 else { throw StartError.sdl(Self.sdlError()) }
        guard let window = SDL_CreateWindow(
            "Curlew gallery", 0, 0, layout.windowWidth, layout.windowHeight, SDL_WINDOW_SHOWN.rawValue)
        else {
            SDL_Quit()
            throw StartError.sdl(Self.sdlError())
        }
        // The software renderer: the same pixels on any X server, with or without a GPU.
        guard let renderer = SDL_CreateRenderer(window, -1, SDL_RENDERER_SOFTWARE.rawValue) else {
            SDL_DestroyWindow(window)
            SDL_Quit()
            throw StartError.sdl(Self.sdlError())
        }
        self.window = window
        self.renderer = renderer

        GridCell.sharedImageDownloader = downloader
        ImageButton.sharedImageDownloader = downloader
        prefetcher = ImagePrefetcher(downloader: downloader, maximumConcurrentPrefetches: 2)
        cells = (0..<(layout.columns * layout.visibleRows)).map { _ in GridCell(placeholder: placeholder) }

        button.setImage(for: .normal, with: catalog.buttonURL("normal"))
        button.setImage(for: .highlighted, with: catalog.buttonURL("highlighted"))
        assignCells()
    }

    /// The placeholder: solid magenta, a colour no catalog image has.
    static func makePlaceholder() throws -> Image {
        try Image(width: 4, height: 4, pixels: Array([[UInt8]](repeating: [255, 0, 255, 255], count: 16).joined()))
    }

    var lastRow: Int { max(0, (catalog.count + layout.columns - 1) / layout.columns - layout.visibleRows) }

    /// Scrolls to `row` (clamped): cells whose rows left the screen are handed the new rows'
    /// items, which cancels their downloads; the next screen is prefetched.
    func scroll(toRow row: Int) {
        let clamped = min(max(0, row), lastRow)
        guard clamped != firstRow else { return }
        firstRow = clamped
        assignCells()
    }

    /// Whether every visible cell and the button show their own images.
    var isLoaded: Bool {
        button.isLoaded && visibleCells().allSatisfy { $0.cell.isLoaded }
    }

    /// Handles pending input, runs what the bindings queued on the main queue (waiting up to
    /// `wait` seconds for something to arrive), then draws a frame.
    func pumpFrame(waitingUpTo wait: TimeInterval) {
        var event = SDL_Event()
        while SDL_PollEvent(&event) != 0 { handle(event) }
        // The main run loop drains the main dispatch queue: the bindings' deliveries run here,
        // on this thread, between frames. It returns early as soon as one arrives.
        _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: wait))
        render()
    }

    /// Draws a frame without running anything queued (for a screenshot of exactly this state).
    func render() {
        SDL_SetRenderDrawColor(renderer, 0, 0, 0, 255)
        SDL_RenderClear(renderer)
        SDL_SetRenderDrawColor(renderer, 40, 40, 40, 255)
        var buttonRect = layout.buttonRect
        SDL_RenderFillRect(renderer, &buttonRect)
        button.draw(in: renderer, rect: layout.buttonRect)
        for (cell, row, column) in visibleCells() {
            cell.draw(in: renderer, rect: layout.cellRect(row: row, column: column))
        }
        SDL_RenderPresent(renderer)
    }

    /// The visible cells with their items and places, for the screenshot manifest.
    func visibleItems() -> [(item: Int, rect: SDL_Rect)] {
        visibleCells().compactMap { cell, row, column in
            cell.item.map { ($0, layout.cellRect(row: row, column: column)) }
        }
    }

    /// Tears SDL down on this thread (never in deinit: SDL wants its own thread).
    func close() {
        prefetcher.stopPrefetchingAll()
        for cell in cells {
            cell.cancelImageDownloadTask()
            cell.releaseTexture()
        }
        button.releaseTextures()
        SDL_DestroyRenderer(renderer)
        SDL_DestroyWindow(window)
        SDL_Quit()
    }

    // MARK: Private

    private func visibleCells() -> [(cell: GridCell, row: Int, column: Int)] {
        var result: [(GridCell, Int, Int)] = []
        for row in 0..<layout.visibleRows {
            for column in 0..<layout.columns {
                let item = (firstRow + row) * layout.columns + column
                guard item < catalog.count else { continue }
                result.append((cells[item % cells.count], row, column))
            }
        }
        return result
    }

    private func assignCells() {
        for row in 0..<layout.visibleRows {
            for column in 0..<layout.columns {
                let item = (firstRow + row) * layout.columns + column
                guard item < catalog.count else { continue }
                let cell = cells[item % cells.count]
                if cell.item != item { assignedItems.append(item) }
                cell.show(item: item, url: catalog.url(for: item))
            }
        }
        // The next screen, warmed at low priority; whatever was queued for a screen that is no
        // longer next is withdrawn (its transfer stops unless a cell wants the image).
        let screen = layout.columns * layout.visibleRows
        let start = (firstRow + layout.visibleRows) * layout.columns
        let next = Set(start..<min(catalog.count, start + screen))
        let dropped = prefetchedItems.subtracting(next)
        prefetcher.stopPrefetching(for: dropped.sorted().map(catalog.url(for:)))
        prefetcher.startPrefetching(for: next.subtracting(prefetchedItems).sorted().map(catalog.url(for:)))
        prefetchedItems = next
    }

    private func handle(_ event: SDL_Event) {
        switch SDL_EventType(event.type) {
        case SDL_QUIT:
            quitRequested = true
        case SDL_MOUSEWHEEL:
            scroll(toRow: firstRow - Int(event.wheel.y))
        case SDL_KEYDOWN:
            switch SDL_KeyCode(UInt32(bitPattern: event.key.keysym.sym)) {
            case SDLK_DOWN: scroll(toRow: firstRow + 1)
            case SDLK_UP: scroll(toRow: firstRow - 1)
            case SDLK_PAGEDOWN: scroll(toRow: firstRow + layout.visibleRows)
            case SDLK_PAGEUP: scroll(toRow: firstRow - layout.visibleRows)
            case SDLK_ESCAPE, SDLK_q: quitRequested = true
            default: break
            }
        case SDL_MOUSEBUTTONDOWN:
            if contains(layout.buttonRect, x: event.button.x, y: event.button.y) { button.isHighlighted = true }
        case SDL_MOUSEBUTTONUP:
            if button.isHighlighted, contains(layout.buttonRect, x: event.button.x, y: event.button.y) {
                scroll(toRow: firstRow + layout.visibleRows)  // the button pages down
            }
            button.isHighlighted = false
        default:
            break
        }
    }

    private func contains(_ rect: SDL_Rect, x: Int32, y: Int32) -> Bool {
        x >= rect.x && x < rect.x + rect.w && y >= rect.y && y < rect.y + rect.h
    }

    private static func sdlError() -> String {
        SDL_GetError().map { String(cString: $0) } ?? "unknown error"
    }
}
