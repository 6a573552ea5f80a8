"""Event types the pools app writes (registered in ``PoolsConfig.ready()``; see ``events.registry``).

The inventory ingest (``pools.services.inventory``) writes ``gpu.*`` events keyed by the GPU UUID:
a GPU a host no longer reports is an alarm until it is back (``gpu.appeared`` clears it); a GPU
whose health goes unhealthy (NVML recovery action, uncorrectable ECC, remapping failure) is an
alarm until a report shows it healthy again (``gpu.healthy``). ``gpu.rail_resolved``: a rediscovery
brought back the CA a GPU's rail names (``pools.services.inventory.resolve_lost_rails``).
``gpu.uuid_conflict`` (object type ``host``, key the reporting host): a refused report that
listed GPUs of another host (``pools.services.inventory.record_conflict``).

The allocation service (``pools.services.allocation``) writes ``allocation.*`` events (object
type ``pool``, key ``<pool>/<allocation id>``): created, released, expired (lease), reclaimed
(borrowed GPUs taken back for another pool's guaranteed share, a Warning: a job lost its GPUs).
A refused request (quota exceeded, not enough free GPUs) is not an event, only an HTTP 409 with
the reason: it changes nothing, and writing it would cost a second transaction on the hot path.
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
    EventType("gpu.rail_resolved", "GPU rail resolved again", P, IN,
              description="The HCA a GPU's rail names (rail_device) is on the fabric again after its CA "
                          "node was gone (a cable pulled or flapping): the GPU's rail is set again."),
    EventType("gpu.uuid_conflict", "GPU report of another host's GPUs", P, MI, raise_alarm=True,
              email=True,
              description="A host's report listed GPU UUIDs stored on another host (a misconfigured or "
                          "hijacked agent): the report was refused and nothing moved. An operator clears it."),
    EventType("allocation.created", "GPUs allocated", P, IN,
              description="An allocation of whole GPUs, MIG slices or a shared-GPU fraction was made in a pool."),
    EventType("allocation.released", "GPUs released", P, IN,
              description="An allocation was released by its owner or an operator; its GPUs are free."),
    EventType("allocation.expired", "Allocation lease expired", P, IN,
              description="An allocation's lease ran out (pools.tasks.expire_leases_task); its GPUs are free."),
    EventType("allocation.reclaimed", "Borrowed GPUs reclaimed", P, W,
              description="An allocation holding borrowed GPUs was ended so that another pool gets its "
                          "guaranteed share."),
]  # fmt: skip
