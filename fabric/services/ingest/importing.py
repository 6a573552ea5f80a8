"""Import a topology text (a file, an upload) into a fabric by name: same-source shortcut, parse,
removal guard, ingest."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from ...choices import DiscoverySource
from ...models import Discovery, Fabric
from ...parsers import detect_and_parse
from ...parsers.records import TopologyParseError
from .samesource import ingest_unchanged, source_digest
from .topology import ingest_topology


def import_topology_text(
    fabric_name: str,
    text: str,
    *,
    filename: str,
    source: str = DiscoverySource.FILE,
    create: bool = True,
    replace: bool = False,
) -> Discovery:
    """Parse ``text`` (any format :func:`fabric.parsers.detect_and_parse` reads) and ingest it into
    the fabric named ``fabric_name``.

    A fabric created here has no live access, so ``discovery_enabled``/``polling_enabled`` are off.
    A text that looks cut short (``Topology.truncated``) is refused; an import that would remove more
    than ``settings.WEFT_IMPORT_MAX_REMOVE_SHARE`` of the stored nodes or links needs ``replace``.

    Raises:
        TopologyParseError: the text is not a topology, or looks cut short (located); raised before
            the database is touched.
        ImportWouldRemove: too much would be removed and ``replace`` is False; nothing is written.
        Fabric.DoesNotExist: no such fabric and ``create`` is False.
    """
    started = timezone.now()
    source_name = filename or "<upload>"
    existing = Fabric.objects.filter(name=fabric_name).first()
    digest = source_digest(text, existing)
    if existing is not None:
        same = ingest_unchanged(existing, digest, source=source, filename=filename, started=started)
        if same is not None:
            return same
    topology = detect_and_parse(text, source_name)
    if topology.truncated:
        line, reason = topology.truncated
        raise TopologyParseError(reason, source_name, line)
    fabric = Fabric.objects.filter(name=fabric_name).first()
    if fabric is None:
        if not create:
            raise Fabric.DoesNotExist(f"no fabric named {fabric_name!r}")
        fabric, _ = Fabric.objects.get_or_create(
            name=fabric_name,
            defaults={
                "description": f"imported from {filename}"[:200],
                "discovery_enabled": False,
                "polling_enabled": False,
            },
        )
    return ingest_topology(
        fabric, topology, source=source, filename=filename, started=started,
        max_remove_share=None if replace else settings.WEFT_IMPORT_MAX_REMOVE_SHARE,
        source_digest=digest,
    )  # fmt: skip
