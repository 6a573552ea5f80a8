"""The master-SM check beside a sweep's collector (``sminfo``): a new master may have handed out new
LIDs, so counters read by LID are suspect until the next discovery."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from fabric.collectors.sm import read_master
from fabric.models import Fabric
from fabric.parsers.records import SMRecord

_SM_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="weft-sminfo")


def check_master_sm(
    fabric: Fabric, env: dict, ca_args: list[str], budget_s: float
) -> tuple[SMRecord | None, str]:
    """Read the master SM (``sminfo``, run beside the collector) and compare it with the one the
    fabric knows. Returns ``(master, note)``: ``master`` only when it moved (the caller hands it to
    ``fabric.services.sm.observe_sms``, whose receiver queues the rediscovery), ``note`` for the
    Sweep ("" when the SM is the same). A new master may have handed out new LIDs, so counters
    read by LID could belong to other ports until the topology is rediscovered."""
    sm, error = read_master(fabric, env=env, ca_args=ca_args, timeout=min(10.0, budget_s))
    if sm is None:
        return None, f"sminfo failed ({error}); SM not checked"
    if sm.guid == fabric.master_sm_guid:
        return None, ""
    return sm, (
        f"master SM moved from {fabric.master_sm_guid} to {sm.guid} (LID {sm.lid}): LIDs may have "
        "changed, counters read by LID are suspect until the next discovery (queued)"
    )


def submit_sm_check(fabric: Fabric, env: dict, ca_args: list[str], budget_s: float) -> Future:
    """Run :func:`check_master_sm` on a small pool of its own (beside the collector); its result
    is the ``(master, note)`` pair."""
    return _SM_POOL.submit(check_master_sm, fabric, env, ca_args, budget_s)
