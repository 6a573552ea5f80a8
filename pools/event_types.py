"""Event types the pools app writes (registered in ``PoolsConfig.ready()``; see ``events.registry``).

The inventory ingest (``pools.services.inventory``) writes ``gpu.*`` events keyed by the GPU UUID:
a GPU a host no longer reports is an alarm until it is back (``gpu.appeared`` clears it); a GPU
whose health goes unhealthy (NVML recovery action, uncorrectable ECC, remapping failure) is an
alarm until a report shows it healthy again (``gpu.healthy``).
"""

from events.choices import Category, Severity
from events.registry import EventType

P = Category.POOLS
IN, W, MI = Severity.INFO, Severity.WARNING, Severity.MINOR

EVENT_TYPES = [
    EventType("gpu.appeared", "GPU appeared", P, IN, clears=("gpu.disappeared",),
              description="A host reported a GPU it did not report before (new, or back after missing)."),
    EventType("gpu.disappeared", "GPU disappeared", P, MI, raise_alarm=True, email=True,
              description="A host's report no longer lists a GPU: the row is kept, marked missing "
                          "(an allocated GPU stays allocated), until the GPU is reported again."),
    EventType("gpu.unhealthy", "GPU unhealthy", P, MI, raise_alarm=True, email=True,
              description="NVML asks for a recovery action (reset, reboot, drain) or reports "
                          "uncorrectable ECC errors or a row-remapping failure."),
    EventType("gpu.healthy", "GPU healthy again", P, IN, clears=("gpu.unhealthy",),
              description="A GPU reported unhealthy before is reported healthy or degraded."),
    EventType("gpu.mig_changed", "MIG layout changed", P, W,
              description="A GPU's MIG mode or its MIG slices changed (slices appeared or disappeared)."),
    EventType("gpu.reading_impossible", "Impossible GPU reading", P, W,
              description="A report gave memory used or free above the total (a wrapped unsigned value, "
                          "e.g. from inside a shared-GPU container); the reading was not stored."),
]  # fmt: skip
