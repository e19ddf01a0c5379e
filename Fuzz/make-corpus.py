#!/usr/bin/env python3
"""Writes the seed corpora in Fuzz/Corpus/<target>/ (run it from anywhere; it replaces them).

Every seed is written by this script: hand-made protocol text (written for Curlew, no third-party
text), and images drawn with Pillow (the repository's venv has it: .build/venv/bin/python). The
images are Pillow's output of pictures drawn here, so they carry no third-party content; Pillow
itself is under the HPND licence. Run: .build/venv/bin/python Fuzz/make-corpus.py
"""
import io
import json
import os
import shutil
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Corpus")


def write(target, seeds):
    directory = os.path.join(ROOT, target)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    for index, seed in enumerate(seeds):
        if isinstance(seed, str):
            seed = seed.encode("utf-8")
        with open(os.path.join(directory, "seed-%02d" % index), "wb") as f:
            f.write(seed)


def crlf(*lines):
    return "".join(line + "\r\n" for line in lines)


write("response-head", [
    crlf("HTTP/1.1 200 OK", "Content-Type: text/html; charset=utf-8", "Content-Length: 12",
         "Set-Cookie: a=b; Path=/", "Cache-Control: max-age=60", ""),
    crlf("HTTP/1.1 100 Continue", "", "HTTP/1.1 201 Created", "Location: /x", "Content-Encoding: gzip", ""),
    crlf("HTTP/2 204", "date: Sun, 06 Nov 1994 08:49:37 GMT", "vary: accept-encoding", ""),
    crlf("HTTP/1.0 301 Moved", "Location: http://example.com/", "X-Folded: one", "  two", "\tthree", ""),
    crlf("HTTP/1.1 401 Unauthorized", "WWW-Authenticate: Digest realm=\"r\", nonce=\"n\"", "Content-Length: 0", "",
         "HTTP/1.1 200 OK", "Content-Length: 5", "Content-Length: 5", "", "Trailer-Field: x", ""),
    crlf("HTTP/1.1 103 Early Hints", "Link: </s.css>; rel=preload", "", "HTTP/1.1 200 OK",
         "Content-Encoding: identity", "Transfer-Encoding: chunked", ""),
])

write("set-cookie", [
    "https://www.example.com/a/b/c\nid=42; Domain=example.com; Path=/; Secure; HttpOnly; Max-Age=3600",
    "http://localhost:8080/\nsession=abc; Expires=Wed, 21 Oct 2037 07:28:00 GMT; SameSite=Lax",
    "https://sub.example.co.uk/x\nSet-Cookie: __Host-t=1; Secure; Path=/",
    "http://127.0.0.1/p/q\n__Secure-x=y; Secure; Domain=127.0.0.1; Max-Age=\"99999999999999999999\"",
    "https://[::1]/\nempty=; path=/deep/path; max-age=-1; expires=0",
])

write("cookie-file", [
    "# Netscape HTTP Cookie File\n\n.example.com\tTRUE\t/\tFALSE\t0\tname\tvalue\n",
    "#HttpOnly_www.example.com\tFALSE\t/a\tTRUE\t2145916800\tsid\t31d4d96e407aad42\n",
    "localhost\tFALSE\t/\tFALSE\t1\texpired\t\r\nexample.org\tfalse\t/\ttrue\t9223372036854775807\t__Secure-k\tv\n",
])

cache_lines = [
    ("\x00\x00\x05\x01", "max-age=0", ["Cache-Control: public, max-age=3600", "Date: Sun, 06 Nov 1994 08:49:37 GMT",
                                      "ETag: \"abc\"", "Age: 10"]),
    ("\x02\x40\x00\x10", "no-cache", ["Expires: Sunday, 06-Nov-94 08:49:37 GMT", "Last-Modified: Sun Nov  6 08:49:37 1994",
                                     "Vary: Accept-Encoding, *"]),
    ("\x00\x84\x01\x02", "min-fresh=10, max-age=\"5\"", ["Cache-Control: s-maxage=100, no-store, private=\"x\"",
                                                        "Expires: 0", "ETag: W/\"weak\""]),
    ("\x07\x01\x00\x00", "only-if-cached", ["Last-Modified: Sat, 29 Feb 2020 23:59:60 GMT", "Date: Mon, 01 Jan 2024 00:00:00 GMT"]),
]
write("cache", [head + request + "\n" + "\n".join(lines) for head, request, lines in cache_lines])

write("content-range", [
    "bytes 0-99/100", " bytes  100-199/1000 ", "bytes 9223372036854775806-9223372036854775806/9223372036854775807",
    "bytes */100", "bytes 5-4/10", "items 0-1/2",
])

resume = {"bytesReceived": 10, "entityTag": "\"abc\"", "headers": {"Accept": "*/*"},
          "partialFileURL": "file:///tmp/curlew-part", "timeoutInterval": 60, "url": "https://example.com/f", "version": 1}
ranged = dict(resume, version=2, rangeFirst=100, rangeLast=199, expectedLength=100, lastModified="Sun, 06 Nov 1994 08:49:37 GMT")
del ranged["entityTag"]
write("resume-data", [json.dumps(resume, sort_keys=True), json.dumps(ranged, sort_keys=True),
                      json.dumps(dict(resume, entityTag="W/\"weak\"", timeoutInterval=1e308))])

# query-string: key NUL kind value... (Fuzz/Targets/QueryString.swift reads this layout).
write("query-string", [
    b"name\x00\x05Curlew & friends\x00",
    b"list\x00\x03\x03a\x00b=c\x00%d\x00n\x00\x00\x7f\x02",
    b"user\x00\x04\x02first\x00\x05J\xc3\xb6rg\x00tags\x00\x03\x02x\x00y\x00flag\x00\x01\x01",
    b"pi\x00\x02\x01\x5d\xe2\x80\x94\x00\x05\xf0\x9f\x90\xa6\x00",
])

# multipart: throttle byte, then parts: kind name NUL body 0xFF [file name NUL mime NUL | header value NUL].
write("multipart", [
    b"\x00\x00field\x00value\xff",
    b"\x03\x01avatar\x00\x89PNG\r\n\x1a\n\xff\"me\".png\x00image/png\x00\x00note\x00line\r\nbreak\xff",
    b"\x20\x02X-Custom\x00body\xffsome value\x00\x00na\"me\r\n\x00\xff",
])

write("json-nulls", [
    '{"a": null, "b": [1, null, {"c": null, "d": "e"}], "f": {"g": null}}',
    '[null, null, [null], {"": null}]', 'null', '"text"', '{"n": 1.5e300, "i": -9223372036854775808, "t": true}',
])


def nlmsg(kind, payload, flags=0, seq=1):
    length = 16 + len(payload)
    return struct.pack("=IHHII", length, kind, flags, seq, 0) + payload + b"\x00" * ((4 - length % 4) % 4)


def rta(kind, value):
    length = 4 + len(value)
    return struct.pack("=HH", length, kind) + value + b"\x00" * ((4 - length % 4) % 4)


link = struct.pack("=BxHiII", 0, 1, 2, 0x1043, 0) + rta(3, b"eth0\x00") + rta(18, rta(1, b"veth\x00"))
route = struct.pack("=BBBBBBBBI", 2, 24, 0, 0, 254, 4, 0, 1, 0) + rta(1, bytes([10, 0, 0, 0])) + \
    rta(5, bytes([10, 0, 0, 1])) + rta(4, struct.pack("=i", 2)) + rta(6, struct.pack("=I", 100)) + rta(15, struct.pack("=I", 254))
route6 = struct.pack("=BBBBBBBBI", 10, 0, 0, 0, 254, 4, 0, 1, 0) + rta(18, struct.pack("=H", 10) + bytes(16)) + rta(7, bytes(16))
write("netlink", [
    b"\x00" + nlmsg(16, link, 2) + nlmsg(3, struct.pack("=i", 0), 2),
    b"\x00" + nlmsg(24, route) + nlmsg(24, route6),
    b"\x00" + nlmsg(2, struct.pack("=i", -13) + bytes(16)),
    b"\xd0" + nlmsg(17, link),
])


def images():
    try:
        from PIL import Image, ImageDraw
    except ImportError:
        sys.exit("Pillow is needed for the image seeds: run this with .build/venv/bin/python")

    def picture(mode, size=(8, 6)):
        image = Image.new("RGBA", size, (0, 0, 0, 0))
        draw = ImageDraw.Draw(image)
        draw.rectangle([1, 1, size[0] - 2, size[1] - 2], fill=(200, 30, 60, 255))
        draw.line([0, size[1] - 1, size[0] - 1, 0], fill=(20, 160, 90, 128))
        return image.convert(mode)

    def encode(image, fmt, **options):
        buffer = io.BytesIO()
        image.save(buffer, fmt, **options)
        return buffer.getvalue()

    frames = [picture("RGBA"), picture("RGBA").rotate(90), picture("RGBA").transpose(Image.FLIP_LEFT_RIGHT)]
    png = [encode(picture("RGBA"), "PNG"), encode(picture("RGB"), "PNG", optimize=True),
           encode(picture("P"), "PNG"), encode(picture("L"), "PNG"), encode(picture("I;16"), "PNG"),
           encode(picture("RGB", (16, 12)), "PNG", interlace=1),
           encode(frames[0], "PNG", save_all=True, append_images=frames[1:], duration=50)]
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90° clockwise
    jpeg = [encode(picture("RGB", (17, 9)), "JPEG", quality=80),
            encode(picture("RGB", (16, 16)), "JPEG", progressive=True),
            encode(picture("L"), "JPEG"), encode(picture("CMYK"), "JPEG"),
            encode(picture("RGB", (9, 5)), "JPEG", exif=exif.tobytes())]
    gif = [encode(picture("P"), "GIF"), encode(picture("P", (16, 12)), "GIF", interlace=True),
           encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=40, loop=0,
                  transparency=0, disposal=2)]
    webp = [encode(picture("RGB"), "WEBP", quality=50), encode(picture("RGBA"), "WEBP", lossless=True),
            encode(picture("RGBA"), "WEBP", quality=70),
            encode(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=30, lossless=True)]
    # The first byte chooses full size (even) or a downsampled decode (odd).
    for name, seeds in (("png", png), ("jpeg", jpeg), ("gif", gif), ("webp", webp)):
        write(name, [bytes([index % 2 * 7]) + seed for index, seed in enumerate(seeds)])


images()
