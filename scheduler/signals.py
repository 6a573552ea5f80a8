"""Signals the scheduler app sends (declarations only; its receivers are in
``scheduler/receivers.py``, connected in ``SchedulerConfig.ready()``).

Sent here: :data:`job_changed` (on commit, by ``scheduler.services.queue``); kwargs ``job_id``,
``state`` (the new state), ``previous`` (``""`` for a new job), ``source`` (``submit``,
``cancel``, ``start``, ``finish``, ``pools``: the pools ended its allocation, ``pass``: a
scheduling pass placed, preempted or timed it out).
"""

from __future__ import annotations

from django.dispatch import Signal

job_changed = Signal()  # kwargs: job_id: int, state: str, previous: str, source: str
#: the job→links index of a job changed (``scheduler.services.joblinks``, on commit); kwargs
#: ``job_id``, ``ports`` (the port keys added or removed)
job_links_changed = Signal()
