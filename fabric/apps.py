from django.apps import AppConfig


class FabricConfig(AppConfig):
    """Topology: fabrics, nodes, ports, links, SMs, discovery and import."""

    name = "fabric"

    def ready(self) -> None:
        from core import enqueue
        from events import registry

        from . import receivers, tasks  # noqa: F401  (receivers: connects them)
        from .api import errors as api_errors
        from .event_types import EVENT_TYPES

        registry.register(self.label, EVENT_TYPES)
        api_errors.register()  # the REST answers of the fabric services' errors
        # what the services queue (they never import tasks); the task looked up at each call
        enqueue.register(
            "fabric.discover",
            lambda fabric_id, task_id: tasks.discover_fabric_task.apply_async(
                args=(fabric_id,), task_id=task_id
            ),
        )
        enqueue.register(
            "fabric.port_action",
            lambda fabric_id, port_id, action, user_id, via="page": tasks.port_action_task.apply_async(
                args=(fabric_id, port_id, action, user_id, via)
            ),
        )
        enqueue.register(
            "fabric.apply_partitions",
            lambda fabric_id, **kw: tasks.apply_partitions_task.delay(fabric_id, **kw),
        )
