"""Checks the gallery's screenshots and the server's log (test.sh runs it).

    python3 check.py shot SHOTS NAME loaded|placeholders|settling
        Reads SHOTS/NAME.xwd (xwd -root) and SHOTS/NAME.json (the gallery's description of
        that frame), writes SHOTS/NAME.png, and checks every visible cell's pixels:
        loaded: each cell shows its own item's colour (and the button its state's colour);
        placeholders: each cell shows the placeholder; settling (right after a fast scroll):
        each cell shows its own colour or the placeholder, never another item's colour.
    python3 check.py log SHOTS ACCESS_LOG
        Checks that the server saw cancelled requests (status 499) and that not every image
        the gallery scrolled past was served in full.

Prints one line per failure and exits 1 if there was any.
"""
import json
import os
import struct
import sys

import images

TOLERANCE = 12  # JPEG's rounding of a solid colour stays well inside; colours are 30 apart
INSET = 6  # pixels left out at a cell's edges (nothing there is blended, but be safe)
# The gallery's fixed geometry (GridLayout.swift), used to work out on our own which item
# belongs at each place rather than trusting the gallery's word.
GAP, CELL, BAR = 8, 96, 56


def read_xwd(path):
    """Returns (width, height, rows of (r, g, b)) from a ZPixmap XWD of depth 24 (Xvfb's)."""
    data = open(path, "rb").read()
    header = struct.unpack(">25I", data[:100])
    header_size, _, pixmap_format, _, width, height = header[:6]
    byte_order, bits_per_pixel, bytes_per_line = header[7], header[11], header[12]
    red_mask, green_mask, blue_mask = header[14:17]
    ncolors = header[19]
    if pixmap_format != 2 or bits_per_pixel not in (24, 32) or bytes_per_line < width * bits_per_pixel // 8:
        raise ValueError("expected a 24- or 32-bit ZPixmap XWD (format %d, %d bits, %d bytes a line)"
                         % (pixmap_format, bits_per_pixel, bytes_per_line))
    offset = header_size + ncolors * 12
    step = bits_per_pixel // 8
    big = byte_order != 0

    def shift(mask):
        return (mask & -mask).bit_length() - 1

    shifts = [(red_mask, shift(red_mask)), (green_mask, shift(green_mask)), (blue_mask, shift(blue_mask))]
    rows = []
    for y in range(height):
        start = offset + y * bytes_per_line
        line = data[start:start + width * step]
        values = [int.from_bytes(line[x:x + step], "big" if big else "little") for x in range(0, width * step, step)]
        rows.append([tuple((v & m) >> s for m, s in shifts) for v in values])
    return width, height, rows


def save_png(path, width, height, rows):
    from PIL import Image

    picture = Image.new("RGB", (width, height))
    picture.putdata([pixel for row in rows for pixel in row])
    picture.save(path)


def close(a, b):
    return all(abs(x - y) <= TOLERANCE for x, y in zip(a, b))


def item_of_colour(rgb):
    """The item whose colour this is (modulo 512), or None."""
    digits = []
    for channel in rgb:
        digit = round((channel - 20) / 30)
        if not 0 <= digit < 8 or abs(channel - (20 + digit * 30)) > TOLERANCE:
            return None
        digits.append(digit)
    return digits[0] + digits[1] * 8 + digits[2] * 64


def region(rows, cell):
    return [rows[y][x]
            for y in range(cell["y"] + INSET, cell["y"] + cell["h"] - INSET)
            for x in range(cell["x"] + INSET, cell["x"] + cell["w"] - INSET)]


def check_shot(shots, name, mode):
    failures = []
    manifest = json.load(open(os.path.join(shots, name + ".json")))
    width, height, rows = read_xwd(os.path.join(shots, name + ".xwd"))
    save_png(os.path.join(shots, name + ".png"), width, height, rows)
    columns = manifest["columns"]
    if not manifest["cells"]:
        failures.append("%s: no visible cells" % name)
    for cell in manifest["cells"]:
        row, column = (cell["y"] - BAR) // (CELL + GAP), (cell["x"] - GAP) // (CELL + GAP)
        item = (manifest["firstRow"] + row) * columns + column
        if item != cell["item"]:
            failures.append("%s: the cell at row %d column %d is item %d, the gallery says %d"
                            % (name, row, column, item, cell["item"]))
        own = images.colour(item)
        pixels = region(rows, cell)
        ok_own = all(close(p, own) for p in pixels)
        ok_placeholder = all(close(p, images.PLACEHOLDER) for p in pixels)
        allowed = {"loaded": ok_own, "placeholders": ok_placeholder, "settling": ok_own or ok_placeholder}[mode]
        if not allowed:
            wrong = next(p for p in pixels if not close(p, own) and not close(p, images.PLACEHOLDER)) \
                if not (ok_own or ok_placeholder) else (pixels[0] if pixels else None)
            other = item_of_colour(wrong) if wrong else None
            failures.append("%s (%s): item %d (row %d, column %d) shows %s%s; expected %s"
                            % (name, mode, item, row, column, wrong,
                               " = item %d's colour" % other if other is not None else "",
                               {"loaded": "its colour %s" % (own,), "placeholders": "the placeholder",
                                "settling": "its colour %s or the placeholder" % (own,)}[mode]))
    if mode == "loaded":
        state = "highlighted" if manifest["highlighted"] else "normal"
        pixels = region(rows, manifest["button"])
        if not all(close(p, images.BUTTON[state]) for p in pixels):
            failures.append("%s: the %s button shows %s, expected %s"
                            % (name, state, pixels[0] if pixels else None, images.BUTTON[state]))
    return failures


def check_log(shots, access_log):
    failures = []
    assigned = {line.strip() for line in open(os.path.join(shots, "assigned.txt")) if line.strip()}
    served, cancelled = set(), set()
    for line in open(access_log):
        fields = line.split()
        if len(fields) >= 2 and fields[1].startswith("/img/"):
            (served if fields[0] == "200" else cancelled if fields[0] == "499" else set()).add(fields[1])
    if not cancelled:
        failures.append("log: no request was cancelled (no status 499 for an image)")
    if not assigned - served:
        failures.append("log: every one of the %d images scrolled past was served in full" % len(assigned))
    print("log: %d images handed to cells, %d served in full, %d requests cancelled mid-wait (499), %d never served"
          % (len(assigned), len(served), len(cancelled), len(assigned - served)))
    return failures


def main(argv):
    if len(argv) == 5 and argv[1] == "shot" and argv[4] in ("loaded", "placeholders", "settling"):
        failures = check_shot(argv[2], argv[3], argv[4])
    elif len(argv) == 4 and argv[1] == "log":
        failures = check_log(argv[2], argv[3])
    else:
        sys.exit(__doc__)
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
