from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    """Locality, topology exports, the job queue and topology-aware placement (issue 12)."""

    name = "scheduler"

    def ready(self) -> None:
        from events import registry

        from . import receivers  # noqa: F401  (connects them)
        from .event_types import EVENT_TYPES
        from .services import queue, rebalance

        registry.register(self.label, EVENT_TYPES)

        from . import maplayer

        maplayer.register()  # its overlay on the fabric map
        from .services import pathfaults

        pathfaults.register()  # path_link_down / path_congested over the job→links index
        from telemetry.porttable import register_port_annotation

        from .services.joblinks import jobs_on_ports

        register_port_annotation("jobs", jobs_on_ports)  # the ports table's Jobs column
        # a pass's last step reclaims borrowed GPUs for guaranteed shares; the rebalancer sits above
        # the queue (it binds and moves jobs through it), so the queue is handed it here
        queue.set_reclaimer(rebalance.reclaim_for_guarantees)
        # and begins with the fault service's replacements (it writes jobs through the queue)
        from core import enqueue

        from .services import faults
        from .tasks import run_pass_task

        queue.set_replacer(faults.replace_faulted)
        enqueue.register("scheduler.pass", lambda: run_pass_task.delay())
