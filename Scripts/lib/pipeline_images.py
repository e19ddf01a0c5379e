"""Generates the pipeline benchmark's photos (Scripts/bench-pipeline.sh): COUNT distinct
1600 x 1200 baseline JPEGs, quality 85, photo-like (smooth colour gradients, soft shapes and
grain, so they compress like photographs and not like flat test cards).

Usage: pipeline_images.py DIR COUNT

Each file's content comes from random.Random(its index): a rerun writes the same bytes.
"""

import os
import random
import sys

from PIL import Image, ImageDraw, ImageFilter

WIDTH, HEIGHT = 1600, 1200


def gradient(rng: random.Random) -> Image.Image:
    """One channel: a linear or radial gradient, rotated, stretched and shifted."""
    if rng.random() < 0.5:
        base = Image.linear_gradient("L")
    else:
        base = Image.radial_gradient("L")
    base = base.rotate(rng.uniform(0, 360), resample=Image.BILINEAR, expand=False, fillcolor=rng.randrange(256))
    scale = rng.uniform(1.2, 3.0)
    big = base.resize((int(WIDTH * scale), int(HEIGHT * scale)), Image.BILINEAR)
    x = rng.randrange(big.width - WIDTH + 1)
    y = rng.randrange(big.height - HEIGHT + 1)
    return big.crop((x, y, x + WIDTH, y + HEIGHT))


def photo(index: int) -> Image.Image:
    rng = random.Random(index)
    image = Image.merge("RGB", [gradient(rng) for _ in range(3)])
    # Soft shapes: "objects" in the scene.
    shapes = Image.new("RGB", (WIDTH, HEIGHT))
    mask = Image.new("L", (WIDTH, HEIGHT), 0)
    draw, mask_draw = ImageDraw.Draw(shapes), ImageDraw.Draw(mask)
    for _ in range(rng.randrange(6, 14)):
        x, y = rng.randrange(WIDTH), rng.randrange(HEIGHT)
        rx, ry = rng.randrange(40, 400), rng.randrange(40, 300)
        box = (x - rx, y - ry, x + rx, y + ry)
        colour = tuple(rng.randrange(256) for _ in range(3))
        if rng.random() < 0.5:
            draw.ellipse(box, fill=colour)
            mask_draw.ellipse(box, fill=rng.randrange(90, 220))
        else:
            draw.rectangle(box, fill=colour)
            mask_draw.rectangle(box, fill=rng.randrange(90, 220))
    mask = mask.filter(ImageFilter.GaussianBlur(rng.uniform(2, 12)))
    image = Image.composite(shapes, image, mask)
    # Grain: seeded noise, slightly blurred, blended in.
    grain = Image.frombytes("L", (WIDTH, HEIGHT), rng.randbytes(WIDTH * HEIGHT))
    grain = grain.filter(ImageFilter.GaussianBlur(0.7)).convert("RGB")
    return Image.blend(image, grain, rng.uniform(0.06, 0.14))


def main() -> None:
    directory, count = sys.argv[1], int(sys.argv[2])
    os.makedirs(directory, exist_ok=True)
    for index in range(count):
        path = os.path.join(directory, f"photo-{index:04d}.jpg")
        if os.path.exists(path):
            continue
        temporary = path + ".tmp"
        photo(index).save(temporary, "JPEG", quality=85, optimize=False, progressive=False)
        os.replace(temporary, path)


if __name__ == "__main__":
    main()
