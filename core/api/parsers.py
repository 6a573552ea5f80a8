"""The API's JSON parser (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``).

DRF's :class:`~rest_framework.parsers.JSONParser` with two refusals a JSON peer never needs:

* a number JSON cannot carry: ``1e999`` reads as ``inf`` in Python (RFC 8259 §6 leaves the range to
  the implementation; no JSON writer produces it). An integer field says "a valid integer is
  required", but a primary key given as ``1e999`` (``{"members": [{"user": 1e999}]}``) raised
  ``OverflowError`` in the lookup: a 500;
* nesting deeper than Python's stack (``[[[[…`` 50,000 deep): ``RecursionError``, a 500.

Both are a 400 ``JSON parse error - …`` as any malformed body.
"""

from __future__ import annotations

import codecs
import json
import math

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is beyond what JSON carries")
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


class StrictJSONParser(JSONParser):
    """:class:`JSONParser` refusing non-finite numbers and nesting beyond the stack (module docstring)."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            return json.load(
                codecs.getreader(encoding)(stream), parse_float=_finite, parse_constant=_no_constant
            )
        except RecursionError:
            raise ParseError("JSON parse error - nested too deep") from None
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise ParseError(f"JSON parse error - {exc}") from None
