import CSDL2

/// Where everything is in the window, in pixels. Fixed sizes keep the screenshots comparable:
/// the test computes the same rectangles from the numbers written next to each screenshot.
struct GridLayout: Sendable {
    let columns = 4
    let visibleRows = 4
    let cellSize: Int32 = 96
    let gap: Int32 = 8
    /// The bar above the grid holding the button.
    let barHeight: Int32 = 56
    let buttonRect = SDL_Rect(x: 8, y: 8, w: 120, h: 40)

    var windowWidth: Int32 { gap + Int32(columns) * (cellSize + gap) }
    var windowHeight: Int32 { barHeight + Int32(visibleRows) * (cellSize + gap) }

    /// The rectangle of the cell in visible row `row`, column `column`.
    func cellRect(row: Int, column: Int) -> SDL_Rect {
        SDL_Rect(
            x: gap + Int32(column) * (cellSize + gap),
            y: barHeight + Int32(row) * (cellSize + gap),
            w: cellSize, h: cellSize)
    }
}
