"""The rebalancing worker (issue 12). A package (issue 27): the module moved to ``running`` whole
first, so that its history follows; the planners are split out of it next. The public names stay
importable from ``scheduler.services.rebalance``."""

from __future__ import annotations

from .running import (
    CONGESTED,
    MOVE,
    RECLAIM,
    REPLACE,
    REQUEUE,
    Action,
    plan_rebalance,
    reclaim_for_guarantees,
    run_rebalance,
)

__all__ = [
    "CONGESTED", "MOVE", "RECLAIM", "REPLACE", "REQUEUE", "Action", "plan_rebalance", "reclaim_for_guarantees",
    "run_rebalance",
]  # fmt: skip
