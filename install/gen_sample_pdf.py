#!/usr/bin/env python3
"""Writes memd's PDF test fixture (memd/engine/tests/fixtures/sample.pdf) using only the stdlib.

The file is a small but complete PDF 1.4: two pages, the standard Helvetica font, one
plain content stream and one Flate-compressed stream, and an exact cross-reference
table. Output is byte-for-byte deterministic so the committed fixture can be
regenerated and compared.

Usage: python3 install/gen_sample_pdf.py [OUTPUT]
"""

import pathlib
import sys
import zlib

PAGE_ONE_LINES = [
    ("F1", 18, "Chapter One: The Lighthouse Keeper"),
    ("F1", 12, "The keeper climbed the stairs every evening at dusk."),
    ("F1", 12, "He trimmed the wick and polished the great lens."),
]
PAGE_TWO_LINES = [
    ("F1", 18, "Chapter Two: The Storm"),
    ("F1", 12, "Waves broke over the rocks and the lamp kept burning."),
    ("F1", 12, "By morning the fishing boats were safely home."),
]


def escape_pdf_string(text):
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def content_stream(lines):
    """One BT/ET block per line, positioned top-down from y=720."""
    parts = []
    y = 720
    for font, size, text in lines:
        parts.append(
            f"BT /{font} {size} Tf 72 {y} Td ({escape_pdf_string(text)}) Tj ET"
        )
        y -= size * 2
    return "\n".join(parts).encode("latin-1")


def stream_object(data, compress):
    if compress:
        body = zlib.compress(data, 9)
        head = f"<< /Length {len(body)} /Filter /FlateDecode >>"
    else:
        body = data
        head = f"<< /Length {len(body)} >>"
    return head.encode("ascii") + b"\nstream\n" + body + b"\nendstream"


def build_pdf():
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R 5 0 R] /Count 2 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 7 0 R >> >> /Contents 4 0 R >>",
        stream_object(content_stream(PAGE_ONE_LINES), compress=False),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 7 0 R >> >> /Contents 6 0 R >>",
        stream_object(content_stream(PAGE_TWO_LINES), compress=True),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica "
        b"/Encoding /WinAnsiEncoding >>",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode("ascii") + body + b"\nendobj\n"
    xref_at = len(out)
    out += f"xref\n0 {len(objects) + 1}\n".encode("ascii")
    out += b"0000000000 65535 f \n"
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode("ascii")
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n"
        f"startxref\n{xref_at}\n%%EOF\n"
    ).encode("ascii")
    return bytes(out)


def main():
    default = pathlib.Path(__file__).resolve().parent.parent / "memd/engine/tests/fixtures/sample.pdf"
    target = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(build_pdf())
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
