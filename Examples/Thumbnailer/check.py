"""Checks the thumbnailer's output against the gallery's generated images (test.sh runs it).

    python3 check.py THUMBNAILS COUNT MAX_SIZE

Every item 0..COUNT-1 must have THUMBNAILS/NNNN.png: its longer side the original's, or
MAX_SIZE when the original is larger (never enlarged), the aspect ratio kept to within a
pixel's rounding, and every pixel the item's known colour. Prints one line per failure.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Gallery"))
import images  # noqa: E402  (the gallery's image rules: colour and size by index)

TOLERANCE = 12  # JPEG's rounding of a solid colour stays well inside; colours are 30 apart


def expected_size(item, limit):
    width, height = images.size(item)
    longer = max(width, height)
    if longer <= limit:
        return width, height
    scale = limit / longer
    return (limit, height * scale) if width >= height else (width * scale, limit)


def check(directory, count, limit):
    from PIL import Image

    failures = []
    for item in range(count):
        path = os.path.join(directory, "%04d.png" % item)
        if not os.path.exists(path):
            failures.append("item %d: no %s" % (item, path))
            continue
        picture = Image.open(path).convert("RGB")
        want = expected_size(item, limit)
        if any(abs(got - exact) > 1 for got, exact in zip(picture.size, want)) or max(picture.size) > limit:
            failures.append("item %d: %dx%d, expected %s (original %s, limit %d)"
                            % (item, picture.size[0], picture.size[1],
                               "x".join("%.1f" % v for v in want), images.size(item), limit))
        colour = images.colour(item)
        raw = picture.tobytes()
        pixels = [tuple(raw[i:i + 3]) for i in range(0, len(raw), 3)]
        wrong = [p for p in pixels if any(abs(a - b) > TOLERANCE for a, b in zip(p, colour))]
        if wrong:
            failures.append("item %d: %d pixels are not its colour %s (e.g. %s)" % (item, len(wrong), colour, wrong[0]))
    return failures


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    problems = check(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    for problem in problems:
        print("FAIL " + problem)
    sys.exit(1 if problems else 0)
