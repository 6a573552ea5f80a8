"""Signals the events app sends (declarations only; its receivers are in ``events/receivers.py``,
connected in ``EventsConfig.ready()``)."""

from __future__ import annotations

from django.dispatch import Signal

#: Sent after a transaction in which alarms were raised, updated or cleared, or mail was queued,
#: commits (``events.engine``). kwargs: ``outcome`` (``events.engine.Outcome``). Receivers:
#: ``events.receivers`` (mail, the alarms pages), ``scheduler.receivers``.
alarms_changed = Signal()

#: sent by ``events.services.prune`` after its own deletions (kwargs ``now``: the prune's time), so
#: that other apps clear what they keep only for a while through their own writers (the scheduler:
#: expired idempotency keys). A receiver returns ``{name: rows cleared}``; ``prune`` adds those to
#: its result. A receiver that raises is logged and does not stop the others.
prune_due = Signal()
