"""Counter sweep of a fabric: collect → rates → store (one transaction) → publish on commit.

``poll_fabric(fabric)`` reads every stored port (LIDs and port numbers from the last discovery, no
rediscovery), computes the interval's rates (``telemetry.semantics``), upserts one
``PortCounters`` row per port, appends the compact history (``telemetry.services.history``), writes a
``Sweep`` and, after commit, sends ``telemetry.signals.sweep_committed`` (through
``telemetry.services.publisher``: from a per-process thread in sweep order when
``WEFT_SWEEP_PUBLISH_ASYNC``, so the heatmap and the counter rules get every sweep without the sweep
waiting for them).

Overlap (PostgreSQL): the MAD poller streams its records in chunks; each chunk's rates are computed
at once (``semantics.derive_fast``, ``derive_raw`` for the uncommon ports) and COPYed + applied by a
store thread inside the sweep's transaction while the later MADs are in flight
(``writer.SweepWriter``); a chunk's ports are sampled at the middle of the time since the previous chunk
(their ``sampled_at``; the rates use exactly it). After the last MAD answer only the last chunk,
the unread ports, the history rows, the Sweep's figures and the commit remain.

Robustness: a port that does not answer (timeout, node gone, LID moved after an SM change, error
status) is marked ``stale`` with the reason and keeps its last raw values; the sweep goes on and is
``partial``. When the collector cannot run at all, the sweep is ``failed``, every port is marked
stale with the reason, and the error is kept on the Sweep (nothing raised to the beat). The
collector has one time budget (``timeout``, default ``WEFT_TOOL_TIMEOUT_S``) shared by its attempts
and its children are killed with their process group when it runs out, so a hung fabric costs one
budget per sweep, well inside the task's soft time limit, and still leaves its failed Sweep row.

Splitting across workers: ``poll_fabric(fabric, group=i, groups=n)`` reads only the ports whose
switch (for a CA port: the switch at the other end of its link) has ``node_id % n == i``; each group
writes its own Sweep (``mechanism`` ``"mad 2/4"``). ``poll_all_task`` fans out one task per group when
``WEFT_POLL_GROUPS`` > 1, so several Celery workers sweep one large fabric in parallel.

Counters are never reset by a sweep; ``reset=True`` (``poll_counters --reset``) clears them after the
read, audited as ``telemetry.reset_counters``.

Modules (one concern each; the public names stay importable from ``telemetry.services.sweep``):
``targets`` (the read plan: ports, LIDs, link rates; the poller's requests and the CapMask cache),
``state`` (the counter state a sweep starts from), ``smcheck`` (the master-SM check beside the
collector), ``store`` (the ``PortCounters`` rows: columns, binary COPY, upsert, the store thread),
``writer`` (rates as the records arrive, the sweep's transaction, history, commit, publication),
``reset`` (clearing counters, audited) and ``run`` (:func:`poll_fabric`, the orchestration).
"""

from __future__ import annotations

from .reset import reset_ports
from .run import NOT_DISCOVERED, poll_fabric
from .store import RAW
from .targets import EXT_BITS, Target

__all__ = ["EXT_BITS", "NOT_DISCOVERED", "RAW", "Target", "poll_fabric", "reset_ports"]
