"""Bytes of an uploaded or read topology file to text: gzip recognised by its magic number, the
uncompressed size capped (``settings.WEFT_IMPORT_MAX_BYTES``, default 256 MiB) so that a small
gzip bomb cannot exhaust memory, UTF-8 with bad bytes replaced (the parser then rejects junk with
a located error). Used by the import API and ``manage.py import_topology``."""

from __future__ import annotations

import gzip
import io
import zlib
from typing import BinaryIO

from django.conf import settings

GZIP_MAGIC = b"\x1f\x8b"


class UploadError(ValueError):
    """The bytes cannot be a topology file: corrupt gzip data or too large."""


def max_bytes() -> int:
    """The cap on an uncompressed topology file, bytes (``settings.WEFT_IMPORT_MAX_BYTES``)."""
    return settings.WEFT_IMPORT_MAX_BYTES


def read_limited(stream: BinaryIO, name: str, limit: int | None = None) -> bytes:
    """At most ``limit`` bytes of ``stream``; :class:`UploadError` when it holds more."""
    limit = max_bytes() if limit is None else limit
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise UploadError(f"{name}: larger than {limit} bytes: refused (WEFT_IMPORT_MAX_BYTES)")
    return data


def read_output(path: str, limit: int | None = None) -> str:
    """A saved tool output (``manage.py switch_health`` / ``cable_info --file``) as text: at most
    ``limit`` bytes (default :func:`max_bytes`), UTF-8 with bad bytes replaced.

    Raises:
        UploadError: the file holds more than ``limit`` bytes (nothing of it is parsed).
        OSError: it cannot be read.
    """
    with open(path, "rb") as stream:
        return read_limited(stream, path, limit).decode("utf-8", errors="replace")


def topology_text(raw: bytes, name: str, limit: int | None = None) -> str:
    """Text of the file ``name`` whose bytes are ``raw`` (gunzipped when gzip).

    Raises:
        UploadError: corrupt gzip data, or more than ``limit`` bytes (uncompressed).
    """
    limit = max_bytes() if limit is None else limit
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = read_limited(gzip.GzipFile(fileobj=io.BytesIO(raw)), name, limit)
        except (OSError, EOFError, zlib.error) as exc:
            raise UploadError(f"{name}: corrupt gzip data: {exc}") from exc
    elif len(raw) > limit:
        raise UploadError(f"{name}: larger than {limit} bytes: refused (WEFT_IMPORT_MAX_BYTES)")
    return raw.decode("utf-8", errors="replace")
