"""The outbound webhook log: one :class:`WebhookDelivery` per message sent to a receiver.

A delivery is written (pending) in the transaction of the change it announces, so a message is
never lost when the receiver or the worker is down, and sent after commit
(``outbound.services``). The body is stored exactly as sent and signed once when queued (the
signature covers the body, so no secret is kept here).
"""

from __future__ import annotations

from django.db import models


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed (gave up)"


class WebhookDelivery(models.Model):
    """One webhook message and its delivery attempts.

    ``url``: the receiver (an HTTP URL, or ``syslog+udp://host:port`` / ``syslog+tcp://host:port``
    for syslog, ``outbound.syslog``); ``event``: what it announces (``job.degraded``…), also sent as the
    ``X-Weft-Event`` header; ``source``: the sender's object (``job:33``) for filtering;
    ``target``: the configured receiver it goes to (``alert-target:4``; the delivery log of one
    target); ``content_type``: the ``Content-Type`` sent; ``body``: the JSON sent (UTF-8 text, exactly the bytes signed; for syslog the RFC 5424 messages, one a line); ``signature``:
    ``sha256=<hex HMAC-SHA256(secret, body)>`` (``X-Weft-Signature``); ``timestamp``: epoch seconds
    when queued (``X-Weft-Timestamp``, also in the body). ``status``/``attempts``/
    ``response_code`` (the last HTTP status, null when no answer)/``last_error``/
    ``next_attempt_at`` (null once delivered or given up)/``delivered_at``.
    """

    created = models.DateTimeField(auto_now_add=True, db_index=True)
    #: ``http(s)://…`` (POST) or ``syslog+udp://host:port`` / ``syslog+tcp://host:port``
    url = models.CharField(max_length=500)
    event = models.CharField(max_length=64)
    source = models.CharField(max_length=64, blank=True, db_index=True)
    target = models.CharField(max_length=64, blank=True, db_index=True)
    content_type = models.CharField(max_length=64, default="application/json")
    body = models.TextField()
    signature = models.CharField(max_length=80)
    timestamp = models.BigIntegerField()
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING, db_index=True
    )
    attempts = models.PositiveIntegerField(default=0)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.event} to {self.url} ({self.status}, {self.attempts} attempts)"
