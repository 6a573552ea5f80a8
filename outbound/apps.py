from django.apps import AppConfig


class OutboundConfig(AppConfig):
    """Signed outbound webhooks (issue 24): one delivery log and one sender for every app."""

    name = "outbound"

    def ready(self) -> None:
        from core import enqueue

        from .tasks import deliver_task

        enqueue.register("outbound.deliver", lambda pk: deliver_task.delay(pk))
