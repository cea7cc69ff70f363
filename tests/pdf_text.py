"""Reading a PDF's pages, bookmarks and images back, with the standard library only.

WeasyPrint writes compressed object streams (FlateDecode); decompressed, the page objects,
the outline entries (one per HTML heading, the PDF's table of contents) and the image
XObjects are plain dictionaries. Source: ISO 32000-1 (PDF 1.7) sec. 7.3.8 (streams), 7.5.7
(object streams), 12.3.3 (document outline), 8.9.5 (image dictionaries).
"""

from __future__ import annotations

import re
import zlib


def _objects(data: bytes) -> bytes:
    """Every stream of ``data`` that inflates, and the file itself, joined."""
    found = [data]
    for match in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S):
        try:
            found.append(zlib.decompress(match.group(1)))
        except zlib.error:
            continue  # not Flate (an image's own encoding)
    return b"\n".join(found)


def _text(literal: bytes) -> str:
    """A PDF string, (literal) or <hex>, UTF-16 with a byte-order mark or PDFDocEncoding."""
    if literal.startswith(b"<"):
        raw = bytes.fromhex(literal[1:-1].decode("ascii"))
    else:
        raw = re.sub(rb"\\([()\\])", rb"\1", literal[1:-1])
    return raw[2:].decode("utf-16-be") if raw[:2] == b"\xfe\xff" else raw.decode("latin-1")


def pdf_pages(data: bytes) -> int:
    """Pages of the PDF."""
    return len(re.findall(rb"/Type\s*/Page\b", _objects(data)))


def pdf_outline(data: bytes) -> list[str]:
    """Every /Title of the PDF in file order: WeasyPrint writes one bookmark per heading, in
    order, then the document information dictionary's title."""
    titles = re.findall(rb"/Title\s*(\((?:[^()\\]|\\.)*\)|<[0-9a-fA-F]*>)", _objects(data))
    return [_text(t) for t in titles]


def pdf_images(data: bytes) -> int:
    """Image XObjects in the PDF."""
    return len(re.findall(rb"/Subtype\s*/Image\b", _objects(data)))
