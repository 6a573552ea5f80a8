"""Celery application, bootstrapped once for the project (STYLE.md "Settings and wiring").

In the embedded deployment there is no broker: ``WeftTask.apply_async`` hands the call to the
in-process worker (``weft.inprocess``) when it runs, or runs it at once (eagerly) in a one-shot
command, so the same ``task.delay()`` works in both deployments.
"""

from __future__ import annotations

import os

from celery import Celery, Task

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "weft.settings")


class WeftTask(Task):
    """Task base class that routes calls to the in-process worker in embedded mode."""

    def apply_async(self, args=None, kwargs=None, **options):
        from django.conf import settings

        if settings.EMBEDDED and not self.app.conf.task_always_eager:
            from weft import inprocess

            return inprocess.submit(self, args or (), kwargs or {})
        return super().apply_async(args, kwargs, **options)


app = Celery("weft", task_cls=WeftTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
