"""Writes the decode benchmark's test images into the directory given (Scripts/bench-decode.sh).

Photo-like content, so the codecs do real work: a random scene of soft shapes upscaled
(smooth gradients and edges) plus fine noise (texture), from a fixed seed so every run decodes
the same bytes. Needs Pillow (in the project venv).
"""
import random
import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter


def scene(width, height, seed):
    rng = random.Random(seed)
    small = Image.new("RGB", (width // 8, height // 8), (rng.randrange(256), 90, 140))
    draw = ImageDraw.Draw(small)
    for _ in range(300):
        x, y = rng.randrange(small.width), rng.randrange(small.height)
        r = rng.randrange(4, max(5, small.width // 6))
        colour = tuple(rng.randrange(256) for _ in range(3))
        draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)
    base = small.filter(ImageFilter.GaussianBlur(2)).resize((width, height), Image.BICUBIC)
    noise = Image.effect_noise((width, height), 40).convert("RGB")
    return Image.blend(base, noise, 0.12)


def main(directory):
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    photo = scene(4000, 3000, 1)
    photo.save(out / "photo-baseline.jpg", quality=90, subsampling=2, optimize=True)
    photo.save(out / "photo-progressive.jpg", quality=90, subsampling=2, progressive=True)
    # The same photo taken with the camera turned: EXIF orientation 6 (rotate 90° clockwise).
    exif = Image.Exif()
    exif[0x0112] = 6
    photo.save(out / "photo-exif6.jpg", quality=90, subsampling=2, optimize=True, exif=exif.tobytes())
    # Turned 180° (EXIF 3): flipped and mirrored, the axes kept.
    exif[0x0112] = 3
    photo.save(out / "photo-exif3.jpg", quality=90, subsampling=2, optimize=True, exif=exif.tobytes())
    photo.save(out / "photo.webp", quality=80, method=4)
    # A 2400 × 1800 PNG with a varying alpha channel, so the RGBA path is the one measured.
    png = photo.resize((2400, 1800), Image.BILINEAR)
    alpha = Image.linear_gradient("L").resize(png.size).filter(ImageFilter.GaussianBlur(8))
    png.putalpha(alpha)
    png.save(out / "photo.png", compress_level=6)
    # The same with alpha as a lossy WebP: decoded whole and resampled when downscaled.
    png.save(out / "photo-alpha.webp", quality=80, method=4)
    # A 20-frame 800 × 600 animation: a window sliding over the scene, palette-quantised.
    frames = []
    for index in range(20):
        crop = photo.crop((index * 60, index * 40, index * 60 + 800, index * 40 + 600))
        frames.append(crop.quantize(colors=256, method=Image.Quantize.MEDIANCUT))
    frames[0].save(out / "animation.gif", save_all=True, append_images=frames[1:], duration=80, loop=0)
    # The same 20 frames as an animated lossy WebP with alpha (a soft vignette), so the
    # animation decoder composes RGBA frames.
    mask = Image.radial_gradient("L").resize((800, 600)).point(lambda v: 255 - v // 2)
    animated = []
    for frame in frames:
        rgba = frame.convert("RGBA")
        rgba.putalpha(mask)
        animated.append(rgba)
    animated[0].save(out / "animation.webp", save_all=True, append_images=animated[1:], duration=80, loop=0,
                     quality=80, method=4)
    (out / "VERSION").write_text("5\n")


if __name__ == "__main__":
    main(sys.argv[1])
