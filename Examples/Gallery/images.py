"""The gallery's test images: what serve.sh serves and what test.sh expects on screen.

Item i is img/NNNN.EXT (EXT cycles png, jpg, gif, webp: the gallery's Catalog.swift uses the
same rule), a solid colour that depends on i alone, of a size that depends on i alone. The
colours sit 30 apart on every channel, so a picture off by a JPEG's rounding is still
unmistakably its own, and none is near the placeholder's magenta or the black background.

    python3 images.py generate DIR [COUNT]   # writes DIR/img/* and DIR/button/*
"""
import os
import sys

EXTENSIONS = ["png", "jpg", "gif", "webp"]
PLACEHOLDER = (255, 0, 255)
BUTTON = {"normal": (0, 96, 255), "highlighted": (255, 160, 0)}


def colour(item):
    """Item i's colour: its index in base 8, one digit per channel."""
    return (20 + (item % 8) * 30, 20 + (item // 8 % 8) * 30, 20 + (item // 64 % 8) * 30)


def size(item):
    """Item i's pixel size: varied, so cells are handed images of every shape."""
    return (24 + item * 7 % 73, 24 + item * 11 % 61)


def path(item):
    return "img/%04d.%s" % (item, EXTENSIONS[item % len(EXTENSIONS)])


def generate(directory, count):
    from PIL import Image  # only the generator needs Pillow; the checker imports this module too

    os.makedirs(os.path.join(directory, "img"), exist_ok=True)
    os.makedirs(os.path.join(directory, "button"), exist_ok=True)
    for item in range(count):
        picture = Image.new("RGB", size(item), colour(item))
        target = os.path.join(directory, path(item))
        extension = EXTENSIONS[item % len(EXTENSIONS)]
        if extension == "jpg":
            picture.save(target, quality=95)
        elif extension == "webp":
            picture.save(target, lossless=True)  # lossy WebP shifts a solid colour's chroma
        else:
            picture.save(target)
    for state, rgb in BUTTON.items():
        Image.new("RGB", (120, 40), rgb).save(os.path.join(directory, "button", state + ".png"))


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[1] != "generate":
        sys.exit(__doc__)
    generate(sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 360)
