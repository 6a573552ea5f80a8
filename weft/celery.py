"""Celery application, bootstrapped once for the project (STYLE.md "Settings and wiring").

In the embedded deployment there is no broker: ``WeftTask.apply_async`` hands the call to the
in-process worker (``weft.inprocess``) when it runs, or runs it at once (eagerly) in a one-shot
command, so the same ``task.delay()`` works in both deployments.

A task whose pool process dies (SIGKILL, OOM killer, hard time limit) is put back in the queue at
once (``task_acks_late`` + ``task_reject_on_worker_lost``, settings) and so runs again; Celery
would put it back every time, so a task that kills its worker would loop. ``WeftTask`` runs a
redelivered message once more and drops it (logged) when it comes back again. A per-fabric task
also deletes its periodic fan-out's "queued" mark when it starts (``core.sites.fan_out``).
"""

from __future__ import annotations

import logging
import os
import threading

from celery import Celery, Task

from core.sites import clear_pending
from weft import inprocess
from weft.queues import PER_FABRIC_TASKS, PER_SITE_TASKS

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "weft.settings")


log = logging.getLogger(__name__)

#: How long a redelivered task's id is remembered (seconds).
REDELIVERY_MEMORY_S = 86400


class WeftTask(Task):
    """Task base class: routes calls to the in-process worker in embedded mode, and runs a message
    that was redelivered (its worker died) once only (see the module docstring)."""

    def __call__(self, *args, **kwargs):
        if self.name in PER_FABRIC_TASKS:  # started: a fan-out may queue the next call (core.sites)
            clear_pending(self.name, args)
        elif self.name in PER_SITE_TASKS and kwargs.get("site") is not None:
            clear_pending(self.name, (*args, kwargs["site"]))
        request = self.request
        info = request.delivery_info or {}
        if info.get("redelivered") and request.id and not request.is_eager:
            from django.core.cache import cache

            if not cache.add(f"weft:redelivered:{request.id}", 1, timeout=REDELIVERY_MEMORY_S):
                log.error(
                    "task %s[%s] came back again after its worker died: not run a third time",
                    self.name,
                    request.id,
                )
                return {"skipped": f"task {request.id} was lost with its worker twice; not run again"}
            log.warning("task %s[%s] redelivered (its worker died): running it again", self.name, request.id)
        return super().__call__(*args, **kwargs)

    def apply_async(self, args=None, kwargs=None, **options):
        from django.conf import settings

        if settings.EMBEDDED and not self.app.conf.task_always_eager:
            if options.get("countdown"):
                # the in-process pool has no countdown: a timer submits the call; without a running
                # pool (tests, one-shot commands) there is nothing to wait in: the call is dropped
                if not inprocess.is_running():
                    return None
                timer = threading.Timer(
                    float(options["countdown"]),
                    inprocess.submit,
                    (self, tuple(args or ()), dict(kwargs or {})),
                )
                timer.daemon = True
                timer.start()
                return None
            return inprocess.submit(self, args or (), kwargs or {})
        return super().apply_async(args, kwargs, **options)


app = Celery("weft", task_cls=WeftTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

import weft.worker  # noqa: E402, F401  (connects the worker's shutdown and orphan hooks)
