import CSDL2
import Foundation

/// Runs a ``ScriptStep`` list against the window. Every wait is bounded by `timeout`: a
/// condition that never comes true ends the run with an error instead of hanging a test.
struct ScriptRunner {
    struct Timeout: Error, CustomStringConvertible {
        let what: String
        var description: String { "timed out waiting for \(what)" }
    }

    struct LoadFailed: Error, CustomStringConvertible {
        let failure: String
        var description: String { "an image failed to load: \(failure)" }
    }

    /// What a screenshotter needs to check a frame: where each cell is and which item it shows.
    struct Manifest: Codable {
        struct Cell: Codable {
            let item: Int
            let x: Int32, y: Int32, w: Int32, h: Int32
        }
        let name: String
        let firstRow: Int
        let columns: Int
        let highlighted: Bool
        let button: Cell
        let cells: [Cell]
    }

    let window: GalleryWindow
    /// Where shots are described and signalled; nil: `shot` only draws.
    let shotsDirectory: URL?
    let timeout: TimeInterval

    func run(_ steps: [ScriptStep]) throws {
        for step in steps {
            switch step {
            case .waitLoaded:
                let deadline = Date(timeIntervalSinceNow: timeout)
                while !window.isLoaded {
                    if let failure = LoadFailures.all.first { throw LoadFailed(failure: failure) }
                    guard Date() < deadline else { throw Timeout(what: "the visible images") }
                    window.pumpFrame(waitingUpTo: 0.05)
                }
                window.render()
            case .shot(let name):
                try shoot(name)
            case .scroll(let rows):
                let direction = rows < 0 ? -1 : 1
                for _ in 0..<abs(rows) {
                    window.scroll(toRow: window.firstRow + direction)
                    window.pumpFrame(waitingUpTo: 0)
                }
            case .frames(let count):
                for _ in 0..<count { window.pumpFrame(waitingUpTo: 1.0 / 60) }
            case .press:
                window.button.isHighlighted = true
                window.render()
            case .release:
                window.button.isHighlighted = false
                window.render()
            case .quit:
                return
            }
        }
    }

    /// Writes everything the gallery asked for, for the server-log check.
    func writeAssignedItems() throws {
        guard let shotsDirectory else { return }
        let text = window.assignedItems.map { "\(window.catalog.url(for: $0).path)\n" }.joined()
        try Data(text.utf8).write(to: shotsDirectory.appendingPathComponent("assigned.txt"))
    }

    private func shoot(_ name: String) throws {
        window.render()
        guard let shotsDirectory else { return }
        let layout = window.layout
        let button = layout.buttonRect
        let manifest = Manifest(
            name: name, firstRow: window.firstRow, columns: layout.columns,
            highlighted: window.button.isHighlighted,
            button: .init(item: -1, x: button.x, y: button.y, w: button.w, h: button.h),
            cells: window.visibleItems().map { .init(item: $0.item, x: $0.rect.x, y: $0.rect.y, w: $0.rect.w, h: $0.rect.h) })
        try JSONEncoder().encode(manifest).write(to: shotsDirectory.appendingPathComponent("\(name).json"))
        try Data().write(to: shotsDirectory.appendingPathComponent("\(name).ready"))
        // Hold this exact frame: nothing queued runs until the picture is taken.
        let done = shotsDirectory.appendingPathComponent("\(name).done").path
        let deadline = Date(timeIntervalSinceNow: timeout)
        while !FileManager.default.fileExists(atPath: done) {
            guard Date() < deadline else { throw Timeout(what: "the screenshot \(name)") }
            SDL_PumpEvents()  // keep the window responsive to the X server meanwhile
            usleep(10_000)
        }
    }
}
