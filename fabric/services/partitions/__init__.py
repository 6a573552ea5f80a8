"""Partitions (PKeys) of a fabric and their application by OpenSM: the one writer of
``Partition``/``PartitionMember`` rows, their ``applied_*`` state and the ``partition.*`` events.

* :func:`import_partitions`: a ``partitions.conf`` (``fabric.parsers.partitions``) into the
  fabric's partitions, ``merge`` (default: the file's partitions are created or replaced whole,
  matched by PKey; partitions not in the file stay) or ``replace`` (partitions not in the file
  are deleted too). A pool's or a job's partition is never changed or deleted by an import.
  One transaction, audited; a bad or refused file changes nothing.
* :func:`save_partition`, :func:`delete_partition`, :func:`set_members` (replace semantics,
  optionally only the members of one ``reason``: the pools app calls
  ``set_members(partition, guids_of_its_hosts, reason="pool")`` and keeps the ``extra`` ones),
  :func:`add_members` and :func:`remove_members` (add or take away some members, the others
  untouched: the UFM-compatible API, whose clients add and remove GUIDs one job at a time).
* :func:`generate_conf`: the fabric's ``partitions.conf`` text (default partition kept, long
  member lists wrapped below OpenSM's 4,094-character line limit).
* :func:`apply`: write that file atomically to the fabric's path, make OpenSM re-read it (SIGHUP
  to the pid in its pid file, or the fabric's reload command run with a timeout in its own
  process group), then verify with ``smpquery pkeys`` on a sample of members and non-members of
  each partition, within a bounded wait, and record applied/drift/failed with events.

* :func:`queue_apply` / :func:`apply_pending` (task ``fabric.tasks.apply_partitions_task``):
  apply on a worker after a change, coalesced: one apply per fabric at a time (lock
  ``fabric.partitions_apply.<id>``), and the holder applies again until what it last wrote is
  what is stored, so a burst of changes (200 allocations of a pool with a PKey) ends in a few
  applies, none lost. The pools app queues one after each change of a pool's members.

After commit ``fabric.signals.partitions_changed`` is sent (the events app applies the events).
Semantics of the file: ``man opensm`` "PARTITION CONFIGURATION".

Modules (one concern, one writer each): ``common`` (errors, owners), ``conf`` (file generation),
``edits`` (partitions and members), ``importing`` (a file into the stored partitions),
``verify`` (reading the ports' P_Key tables), ``opensm`` (write, signal the master SM, record),
``coalesce`` (the one apply path: :func:`request_apply`, :func:`apply_pending`), ``reconcile``
(the periodic comparison with what the master SM applies). The public names stay importable
from ``fabric.services.partitions``.
"""

from __future__ import annotations

from .coalesce import (
    MAX_APPLY_ROUNDS,
    apply_pending,
    auto_apply_enabled,
    is_current,
    queue_apply,
    request_apply,
    run_apply,
    wait_apply,
)
from .common import (
    OWNER_NAME_RE,
    ApplyError,
    PartitionError,
    PartitionOwned,
    partition_owner,
    partition_owners,
)
from .conf import conf_digest, generate_conf, partitions_path, to_record
from .edits import (
    MemberChange,
    add_members,
    delete_partition,
    remove_members,
    save_partition,
    set_members,
)
from .importing import MERGE, REPLACE, ImportSummary, import_partitions
from .opensm import ApplyResult, apply, forget_applied, master_pid_file, signal_opensm, write_atomically
from .reconcile import ReconcileResult, reconcile

__all__ = [
    "MAX_APPLY_ROUNDS", "MERGE", "OWNER_NAME_RE", "REPLACE", "ApplyError", "ApplyResult", "ImportSummary", "forget_applied",
    "MemberChange", "PartitionError", "PartitionOwned", "add_members", "apply", "apply_pending",
    "auto_apply_enabled", "conf_digest", "delete_partition", "generate_conf", "import_partitions",
    "is_current", "master_pid_file", "reconcile", "ReconcileResult", "partition_owner", "partition_owners", "partitions_path", "queue_apply",
    "remove_members", "request_apply", "run_apply", "save_partition", "set_members", "signal_opensm", "to_record", "wait_apply", "write_atomically",
]  # fmt: skip
