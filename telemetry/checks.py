"""System checks of the telemetry app (registered in ``TelemetryConfig.ready()``): the settings that
name telemetry's facts, which ``weft/settings.py`` writes without importing telemetry.

* ``telemetry.E002``: what the settings write again left telemetry's own: the defaults of
  ``WEFT_MAD_TIMEOUT_S`` / ``WEFT_XMIT_WAIT_TICK_NS`` (the poller's ``DEFAULT_TIMEOUT_S``,
  ``semantics.DEFAULT_TICK_NS``) and the counter names ``WEFT_HEALTH_ERROR_THRESHOLDS`` accepts
  (``HEALTH_ERROR_COUNTERS``, ``semantics.ERROR_COUNTERS``): one fact, two places.
"""

from __future__ import annotations

import os

from django.conf import settings
from django.core import checks

from .collectors.madpoll import DEFAULT_TIMEOUT_S
from .semantics import DEFAULT_TICK_NS, ERROR_COUNTERS


@checks.register()
def settings_name_telemetry_facts(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """``telemetry.E002`` for each setting that differs from the telemetry fact it repeats."""
    out = []
    if tuple(settings.HEALTH_ERROR_COUNTERS) != tuple(ERROR_COUNTERS):
        out.append(
            checks.Error(
                "HEALTH_ERROR_COUNTERS differs from telemetry.semantics.ERROR_COUNTERS", id="telemetry.E002"
            )
        )
    for variable, constant in (
        ("WEFT_MAD_TIMEOUT_S", DEFAULT_TIMEOUT_S),
        ("WEFT_XMIT_WAIT_TICK_NS", DEFAULT_TICK_NS),
    ):
        if variable not in os.environ and getattr(settings, variable) != constant:
            out.append(
                checks.Error(
                    f"{variable} defaults to {getattr(settings, variable)}, not {constant}",
                    id="telemetry.E002",
                )
            )
    return out
