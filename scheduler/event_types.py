"""Event types the scheduler app writes (registered in ``SchedulerConfig.ready()``; see
``events.registry``).

The job queue (``scheduler.services.queue``) writes one ``job.*`` event per state change of a
job (object type ``job``, key the job id): submitted, placed (GPUs bound through the pools'
allocation service), started, completed, failed (the job said so), timeout (it ran past its time limit),
cancelled, and preempted (a Warning: a job lost its GPUs to a higher-priority one, or its
allocation was reclaimed or expired under it). A job that stays pending is not an event on every
pass: its decision and reasons are on the job (``Job.decision``, ``JobDecision``). A preempted job
that asked to be requeued is ``job.requeued`` after its ``job.preempted``. The rebalancer
(``scheduler.services.rebalance``) writes ``job.reclaimed``, ``job.moved``, and once per job
and target ``job.move_proposed`` and ``job.congested``. The fault service
(``scheduler.services.faults``) writes ``job.degraded`` (a running job's fabric failed under
it; again when a new cause appears), ``job.recovered`` (every cause cleared) and
``job.replaced`` (its failed hosts swapped for healthy ones); ``job.degraded``,
``job.requeued``, ``job.replaced`` and ``job.failed`` name the tenant's contacts in
``details["notify"]``, who get them by mail.
"""

from events.choices import Category, Severity
from events.registry import EventType

S = Category.SCHEDULER
IN, W = Severity.INFO, Severity.WARNING

EVENT_TYPES = [
    EventType("job.submitted", "Job submitted", S, IN,
              description="A job was submitted to the queue (pending until a pass places it)."),
    EventType("job.placed", "Job placed", S, IN,
              description="A pass placed a job: its GPUs are bound through the pools' allocation service."),
    EventType("job.started", "Job started", S, IN, description="A placed job reported it is running."),
    EventType("job.completed", "Job completed", S, IN, description="A job ended successfully; its GPUs are free."),
    EventType("job.failed", "Job failed", S, W,
              description="A job ended with an error; its GPUs are free."),
    EventType("job.timeout", "Job timed out", S, W,
              description="A running job ran past its time limit: the scheduler ended it (state timeout) and freed "
                          "its GPUs; the details give the limit, the start and how long it ran."),
    EventType("job.cancelled", "Job cancelled", S, IN,
              description="A job was cancelled by its owner or an operator; its GPUs (if any) are free."),
    EventType("job.preempted", "Job preempted", S, W,
              description="A preemptible job lost its GPUs to a higher-priority job, or its allocation was "
                          "reclaimed or expired under it."),
    EventType("job.requeued", "Job requeued", S, IN,
              description="A preempted job that asked to be requeued (by default a preemptible one) is pending "
                          "again, with its submit time and priority kept."),
    EventType("job.degraded", "Job degraded", S, W,
              description="A running job's fabric failed under it (an HCA link of one of its hosts down, its host "
                          "gone, its PKey missing on one of its ports, congested links); it keeps running. The "
                          "details list the causes (code and object)."),
    EventType("job.recovered", "Job recovered", S, IN,
              description="Every cause of a degraded job's degradation cleared: it is running again."),
    EventType("job.replaced", "Job host replaced", S, IN,
              description="A degraded job with on_fault=replace was given a healthy host of the same placement "
                          "unit for each failed one (it is placed there and starts again)."),
    EventType("job.reclaimed", "GPUs reclaimed for a job", S, IN,
              description="The rebalancer preempted preemptible jobs of other pools holding borrowed GPUs and placed "
                          "a pending job of a pool below its guaranteed share on them."),
    EventType("job.moved", "Job moved", S, IN,
              description="The rebalancer moved a preemptible job to other hosts so that a whole unit (leaf) came "
                          "free; the job is placed on its new hosts and starts again there."),
    EventType("job.move_proposed", "Job move proposed", S, IN,
              description="The rebalancer found a move that would free a whole unit but does not make it (the job is "
                          "not preemptible, or no job waits for that shape)."),
    EventType("job.congested", "Job on links with congestion or error alarms", S, W,
              description="A placed or running job crosses uplinks with open congestion or error alarms, and a "
                          "placement that avoids them is free now (reported, not moved)."),
]  # fmt: skip
