"""Record what the fabric app signals."""

from __future__ import annotations

from collections.abc import Iterator

from fabric.signals import discovery_committed


def record_committed() -> Iterator[list[tuple[int, int]]]:
    """Record ``discovery_committed`` sends as ``[(fabric_id, discovery_id)]``.

    Other apps' receivers (rules engine, heatmap) are detached for the test: these tests check the
    fabric app's side of the contract (the signal is sent on commit), not the listeners.
    """
    sent: list[tuple[int, int]] = []

    def receiver(sender, fabric_id, discovery_id, **kw):
        sent.append((fabric_id, discovery_id))

    saved = discovery_committed.receivers[:]
    discovery_committed.receivers = []
    discovery_committed.sender_receivers_cache.clear()
    discovery_committed.connect(receiver, weak=False)
    try:
        yield sent
    finally:
        discovery_committed.receivers = saved
        discovery_committed.sender_receivers_cache.clear()
