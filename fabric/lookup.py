"""Which nodes a typed text names: by GUID, LID or node description (one rule for the API's node
search ``?q=`` and ``manage.py show_port``).

The rule, applied to the text stripped of surrounding spaces (an empty text names no node):

* **LID** — ASCII decimal digits with a value of at most 0xFFFF (LIDs are 16-bit, IBTA Vol 1
  4.1.3): the node's own LID (a switch's port 0) or the LID of any of its ports.
* **GUID** — ``0x`` (any case) and 1 to 16 hex digits, or 8 to 16 hex digits without ``0x``;
  always read as hexadecimal (as every IB tool prints GUIDs: ``ibstat``, ``ibnetdiscover``,
  ``sminfo``, UFM without the ``0x``), never as a decimal number, and compared as a 64-bit number
  (padding does not matter): the node GUID or the GUID of any of its ports. Without ``0x`` at least
  8 digits are needed: a real GUID starts with its vendor's 24-bit OUI, so it has 11 or more
  significant digits, while short words ("cafe", "face") and LIDs are not GUIDs.
* **Name or description** — the node's name (``Node.name``: its node-name map entry, else the
  trimmed description) or its raw description equal to the text (``show_port``) or containing
  it, case-insensitively (the search).

A text can name by several of these at once (``"12345678"`` is a GUID and maybe a description);
the result is their union. A number with 6 or 7 digits above 0xFFFF is only a description.
"""

from __future__ import annotations

from typing import Literal

from django.db.models import Q

from core.params import int_param

from .guid import normalize_guid
from .models import Port

#: Fewest hex digits of a GUID written without ``0x`` (see the module docstring).
MIN_BARE_GUID_DIGITS = 8


def lid_of_text(text: str) -> int | None:
    """The LID ``text`` names (0..0xFFFF, decimal ASCII digits), else None."""
    return int_param(text.strip(), hi=0xFFFF)


def guid_of_text(text: str) -> str | None:
    """The canonical GUID (``0x`` + 16 lowercase hex digits) ``text`` names, else None: ``0x`` and
    1-16 hex digits, or 8-16 hex digits without ``0x``."""
    value = text.strip().lower()
    if not value.startswith("0x") and not MIN_BARE_GUID_DIGITS <= len(value) <= 16:
        return None
    try:
        return normalize_guid(value)
    except ValueError:
        return None


def node_q(text: str, *, description: Literal["exact", "icontains"] = "exact") -> Q:
    """A ``Q`` on ``Node`` matching the nodes ``text`` names (the rule of the module docstring).

    ``description``: ``"exact"`` (the node's name or description equals the text) or
    ``"icontains"`` (one contains the text, any case). Port LIDs and GUIDs are matched through a subquery, so the
    result has no duplicate nodes.
    """
    value = text.strip()
    if not value:
        return Q(pk__in=[])
    q = Q(**{f"name__{description}": value}) | Q(**{f"description__{description}": value})
    if (lid := lid_of_text(value)) is not None:
        q |= Q(lid=lid) | Q(pk__in=Port.objects.filter(lid=lid).values("node_id"))
    if (guid := guid_of_text(value)) is not None:
        q |= Q(node_guid=guid) | Q(pk__in=Port.objects.filter(port_guid=guid).values("node_id"))
    return q
