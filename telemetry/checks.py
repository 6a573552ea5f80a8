"""System checks of the telemetry app (registered in ``TelemetryConfig.ready()``): the settings that
name telemetry's facts, which ``weft/settings.py`` writes without importing telemetry.

* ``telemetry.E001``: ``WEFT_HEALTH_ERROR_THRESHOLDS`` names a counter that is not one of
  ``telemetry.semantics.ERROR_COUNTERS``.
* ``telemetry.E002``: the settings' defaults of ``WEFT_MAD_TIMEOUT_S`` / ``WEFT_XMIT_WAIT_TICK_NS``
  left the poller's ``DEFAULT_TIMEOUT_S`` / ``semantics.DEFAULT_TICK_NS`` (one fact, two places).
"""

from __future__ import annotations

import os

from django.conf import settings
from django.core import checks

from .collectors.madpoll import DEFAULT_TIMEOUT_S
from .semantics import DEFAULT_TICK_NS, ERROR_COUNTERS


@checks.register()
def settings_name_telemetry_facts(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """``telemetry.E001`` per unknown counter of ``WEFT_HEALTH_ERROR_THRESHOLDS``; ``telemetry.E002``
    when a default of the settings differs from the telemetry constant it repeats."""
    out = [
        checks.Error(
            f"WEFT_HEALTH_ERROR_THRESHOLDS: {name!r} is not one of {', '.join(ERROR_COUNTERS)}",
            id="telemetry.E001",
        )
        for name in settings.WEFT_HEALTH_ERROR_THRESHOLDS
        if name not in ERROR_COUNTERS
    ]
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
