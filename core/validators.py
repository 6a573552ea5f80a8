"""Validators shared by every app's serializers, forms and models.

:func:`printable_text`: names and descriptions people give objects (tenants, pools, jobs,
allocations' job references, fabrics, partitions, devices, API tokens) must not carry control or
invisible formatting characters. A right-to-left override (U+202E) makes ``gpu-job\u202egnp.exe``
read as ``gpu-jobexe.png`` on a page, in a mail or an event message; a NUL is refused by
PostgreSQL (a 500); a newline or an escape sequence forges lines in logs and terminals.
"""

from __future__ import annotations

import unicodedata

from django.core.exceptions import ValidationError
from django.utils.deconstruct import deconstructible

#: Unicode general categories refused (Unicode Standard, chapter 4.5 "General Category"):
#: Cc control (C0, DEL, C1: NUL, tab, newline, ESC…), Cf format (bidirectional overrides and
#: isolates U+202A-U+202E, U+2066-U+2069, zero-width U+200B-U+200F, U+FEFF…), Cs surrogates,
#: Co private use, Zl/Zp line and paragraph separators (U+2028, U+2029).
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})


def first_unprintable(value: str) -> tuple[int, str] | None:
    """``(index, character)`` of the first character of a refused category in ``value``, or None."""
    for i, ch in enumerate(value):
        if unicodedata.category(ch) in REFUSED_CATEGORIES:
            return i, ch
    return None


@deconstructible
class PrintableText:
    """Django/DRF validator (a model field's ``validators``, a serializer or form field's):
    refuses a string holding a character of :data:`REFUSED_CATEGORIES`.

    Raises:
        django.core.exceptions.ValidationError: code ``unprintable``, naming the character
            (``U+202E RIGHT-TO-LEFT OVERRIDE``) and its 1-based position. DRF reports it under the
            field's name (a 400 ``{"name": [message]}``), a form under the field.
    """

    code = "unprintable"

    def __call__(self, value) -> None:
        if not isinstance(value, str):
            return
        found = first_unprintable(value)
        if found is None:
            return
        i, ch = found
        name = unicodedata.name(ch, unicodedata.category(ch))
        raise ValidationError(
            "Control or invisible formatting characters are not allowed: U+%(code)04X %(name)s at "
            "character %(position)d.",
            code=self.code,
            params={"code": ord(ch), "name": name, "position": i + 1},
        )

    def __eq__(self, other) -> bool:
        return isinstance(other, PrintableText)

    def __hash__(self) -> int:
        return hash(PrintableText)


#: the one instance to put in ``validators=[...]``
printable_text = PrintableText()
