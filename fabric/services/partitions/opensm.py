"""Apply to OpenSM: write the file atomically, make the master SM re-read it, verify, record."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import audit
from core import procs
from events.services import EventSpec, record_events

from ...choices import ApplyState
from ...collectors.sm import probe_master
from ...collectors.tools import ToolAborted, fabric_env, run_process
from ...guid import normalize_guid
from ...models import Fabric, Partition
from ...parsers.partitions import (
    generate,
)
from .common import ApplyError, fabric_event, named_in, notify_changed, partition_tenants
from .conf import conf_comment, partitions_path, to_record
from .verify import MIN_READ_S, member_counts, plan_checks, verify_checks

log = logging.getLogger(__name__)

#: how an apply's error starts when the stored partitions could not be written as a file (the
#: message may name one of them)
GENERATE_ERROR = "cannot generate the partitions file"


def write_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never a part:
    a temporary file in the same directory, fsynced, renamed over it (``os.replace``), the
    directory fsynced. Keeps the old file's mode (default 0644).

    Raises:
        OSError: the directory does not exist or is not writable.
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


#: seconds of disagreeing ports after signalling OpenSM before it is signalled once more
RESIGNAL_AFTER_S = 10.0


def master_pid_file(fabric: Fabric, *, timeout: float = 15.0) -> str:
    """The pid file of the OpenSM that is master now. With ``Fabric.sm_pid_files`` (``{port GUID:
    pid file}``, one per OpenSM of an HA pair): the master is asked of the subnet (``sminfo``,
    ``fabric.collectors.sm.probe_master``; when it cannot say, the SM watch's last master,
    ``Fabric.master_sm_guid``) and its entry is returned, so an apply after an SM fail-over
    signals the new master, never the dead one's remembered pid. Without: ``Fabric.sm_pid_file``
    or ``WEFT_SM_PID_FILE`` (one OpenSM); "" when nothing is configured.

    Raises:
        ApplyError: ``sm_pid_files`` is set and no master is known, or the master has no entry.
    """
    files = {normalize_guid(g): path for g, path in (fabric.sm_pid_files or {}).items()}
    if not files:
        return fabric.sm_pid_file or settings.WEFT_SM_PID_FILE
    probe = probe_master(fabric, timeout=timeout)
    guid = probe.master.guid if probe.master is not None else fabric.master_sm_guid
    if not guid:
        raise ApplyError(
            f"fabric {fabric.name}: no master SM answers ({probe.error or 'sminfo'}), none known"
        )
    guid = normalize_guid(guid)
    if guid not in files:
        said = (probe.error.strip().splitlines() or [""])[-1][:160]
        seen = "sminfo" if probe.master is not None else f"the SM watch's last master; sminfo: {said}"
        raise ApplyError(
            f"the master SM is {guid} ({seen}), which has no pid file in sm_pid_files "
            f"(configured: {', '.join(sorted(files))})"
        )
    return files[guid]


def signal_opensm(fabric: Fabric, *, timeout: float = 30.0) -> str:
    """Make OpenSM re-read its partitions file: run ``Fabric.sm_reload_command`` (argv, with the
    fabric's tool environment, ``timeout`` seconds, its own process group) when set, else send
    SIGHUP to the pid in the master's pid file (:func:`master_pid_file`: the current master's
    entry of ``Fabric.sm_pid_files``, else ``Fabric.sm_pid_file`` or ``WEFT_SM_PID_FILE``):
    OpenSM then runs a heavy sweep, which re-reads the file and sets the ports' P_Key tables.
    Returns what was done.

    Raises:
        ApplyError: nothing configured, an unreadable pid file, no such process or only a zombie
            (an OpenSM that exited and was not reaped: ``core.procs.is_running``), a command that
            failed or timed out.
    """
    command = fabric.sm_reload_command or []
    if command:
        argv = [str(a) for a in command]
        try:
            proc = run_process(argv, env=fabric_env(fabric), timeout=timeout, text=True)
        except subprocess.TimeoutExpired:
            raise ApplyError(
                f"reload command {argv[0]} did not finish within {timeout:g} s (killed)"
            ) from None
        except OSError as exc:
            raise ApplyError(f"reload command {argv[0]} could not run: {exc}") from None
        if proc.returncode != 0:
            said = (proc.stderr or proc.stdout).strip()[-300:]
            raise ApplyError(f"reload command {argv[0]} failed (exit {proc.returncode}): {said}")
        return f"ran {' '.join(argv)}"
    pid_file = master_pid_file(fabric, timeout=min(timeout, 15.0))
    if not pid_file:
        raise ApplyError(
            f"fabric {fabric.name}: no way to make OpenSM re-read its partitions (set sm_pid_file, "
            "WEFT_SM_PID_FILE, sm_pid_files or sm_reload_command)"
        )
    try:
        pid = int(Path(pid_file).read_text().split()[0])
    except (OSError, ValueError, IndexError) as exc:
        raise ApplyError(f"OpenSM pid file {pid_file}: {exc or 'empty'}") from None
    if pid <= 1:
        raise ApplyError(f"OpenSM pid file {pid_file}: pid {pid} is not a process to signal")
    if not procs.is_running(pid):  # gone, or a zombie: SIGHUP to a zombie "succeeds" and does nothing
        what = "has exited, not yet reaped by its parent" if procs.state(pid) else "no such process"
        raise ApplyError(
            f"SIGHUP to OpenSM pid {pid} (from {pid_file}) not sent: OpenSM is not running ({what})"
        )
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        raise ApplyError(f"SIGHUP to OpenSM pid {pid} (from {pid_file}): {exc.strerror}") from None
    return f"SIGHUP to pid {pid}"


@dataclass
class ApplyResult:
    """What :func:`apply` did (the ``partitions --apply`` command's JSON line)."""

    fabric: str
    path: str = ""
    ok: bool = False
    state: str = ApplyState.FAILED
    signalled: str = ""
    sha256: str = ""
    bytes: int = 0
    lines: int = 0
    longest_line: int = 0
    partitions: int = 0
    members: int = 0
    checked_ports: int = 0
    drift: list[dict] = field(default_factory=list)
    #: port checks that could not be read (``verify_checks``): with no drift, the apply is ``failed``
    unverified: list[dict] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    #: seconds from OpenSM signalled to the verification's answer (the ports read as configured)
    verify_seconds: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def apply(
    fabric: Fabric,
    *,
    user=None,
    timeout: float | None = None,
    sample: int | None = None,
    signal_timeout: float = 30.0,
) -> ApplyResult:
    """Apply the stored partitions of ``fabric`` on its OpenSM and verify them.

    Steps: :func:`generate_conf` → :func:`write_atomically` to :func:`partitions_path` →
    :func:`signal_opensm` → read ``smpquery pkeys`` of the planned ports (up to ``sample``
    members and ``sample`` non-members per partition; default ``WEFT_PARTITIONS_VERIFY_SAMPLE``)
    again until each carries its partition's PKey as configured (members: full/limited bit;
    non-members: absent) or ``timeout`` seconds (default ``WEFT_PARTITIONS_VERIFY_TIMEOUT_S``)
    pass (OpenSM signalled once more when they still disagree after :data:`RESIGNAL_AFTER_S`).
    Then, in one transaction: each partition's ``applied_state`` (``applied``, ``partial`` when
    members are not in the fabric, or ``drift`` with the disagreeing ports in ``drift``),
    ``applied_members``, ``applied_at``, ``applied_hash``; events
    ``partition.applied`` (clears drift/failure alarms) or one ``partition.drift`` per drifting
    partition; an audit entry. A failure before verification (nothing to write to, OpenSM not
    signalled) records ``failed`` and ``partition.apply_failed`` and returns ``ok`` False with
    ``error``; it never raises for those. Verification that could not read the sampled ports
    (``smpquery`` failing or hung: ``unverified``, no port disagreeing) records ``failed`` and
    ``partition.apply_failed`` too, with the ports in the event, not drift. A worker shutdown in
    the middle (the tools refused by ``abort_all``) records nothing and returns state
    ``pending`` (:func:`_interrupted`) at once, instead of waiting out the verification
    ``timeout`` and reporting every port as drift.
    """
    t0 = time.monotonic()
    timeout = settings.WEFT_PARTITIONS_VERIFY_TIMEOUT_S if timeout is None else timeout
    sample = settings.WEFT_PARTITIONS_VERIFY_SAMPLE if sample is None else sample
    result = ApplyResult(fabric=fabric.name)
    parts: list[Partition] = []
    try:
        # one apply per fabric at a time writes and signals (PostgreSQL row lock; the partitions
        # read inside it are the ones written)
        with transaction.atomic():
            Fabric.objects.select_for_update().filter(pk=fabric.pk).first()
            parts = list(Partition.objects.filter(fabric=fabric).prefetch_related("members").order_by("pkey"))
            try:
                text = generate([to_record(p) for p in parts], comment=conf_comment(fabric))
            except ValueError as exc:  # a stored row the file cannot say (set outside the services)
                raise ApplyError(f"{GENERATE_ERROR}: {exc}") from None
            lines = text.splitlines()
            result.sha256 = hashlib.sha256(text.encode()).hexdigest()
            result.bytes, result.lines = len(text.encode()), len(lines)
            result.longest_line = max(map(len, lines), default=0)
            result.partitions = len(parts)
            result.members = sum(len(p.members.all()) for p in parts)
            result.path = partitions_path(fabric)
            if not result.path:
                raise ApplyError(
                    f"fabric {fabric.name}: no partitions file configured "
                    "(Fabric.partitions_path or WEFT_PARTITIONS_PATH)"
                )
            try:
                write_atomically(result.path, text)
            except OSError as exc:
                raise ApplyError(f"cannot write {result.path}: {exc}") from None
            result.signalled = signal_opensm(fabric, timeout=signal_timeout)
    except ApplyError as exc:
        result.error = str(exc)
        result.seconds = round(time.monotonic() - t0, 3)
        record_failure(fabric, parts, result, user)
        return result
    except ToolAborted as exc:  # the reload command was refused: the worker is stopping
        return _interrupted(fabric, result, exc, t0)
    t_signalled = time.monotonic()
    checks = plan_checks(fabric, parts, sample)
    result.checked_ports = len({c.guid for c in checks})
    try:
        drift, unverified = verify_checks(fabric, parts, checks, min(timeout, RESIGNAL_AFTER_S))
        left = timeout - (time.monotonic() - t_signalled)
        if (drift or unverified) and left >= MIN_READ_S:
            if drift:
                # OpenSM folds a SIGHUP that arrives during a sweep into that sweep, which may have
                # read the file before it was written: no sweep follows and the ports keep the old
                # PKeys. Ask once more.
                try:
                    result.signalled += f"; again after {RESIGNAL_AFTER_S:g} s: " + signal_opensm(
                        fabric, timeout=signal_timeout
                    )
                except ApplyError as exc:
                    log.warning("re-signalling OpenSM for %s: %s", fabric.name, exc)
            # then the rest of the verification time, for ports that disagree and for ports not
            # read yet (a slow fabric reads fewer than the sample in the first RESIGNAL_AFTER_S:
            # giving up then failed the apply "within <timeout> s" after only that)
            drift, unverified = verify_checks(fabric, parts, checks, left)
    except ToolAborted as exc:
        return _interrupted(fabric, result, exc, t0)
    result.drift, result.unverified = drift, unverified
    result.verify_seconds = round(time.monotonic() - t_signalled, 3)
    result.seconds = round(time.monotonic() - t0, 3)
    if unverified and not drift:
        # the ports could not be read (smpquery failing, hung): nothing says OpenSM disagrees, and
        # nothing says it applied the file: a failure of the apply's verification, not drift
        first = unverified[0]
        ports = len({u["guid"] for u in unverified})  # a port carries one check per partition
        result.error = (
            f"written to {result.path} and OpenSM signalled ({result.signalled}), but not verified: "
            f"{ports} of the {result.checked_ports} sampled port(s) could not be read "
            f"within {timeout:g} s (e.g. {first['guid']}: {first['error']})"
        )
        record_failure(fabric, parts, result, user)
        return result
    result.ok = not drift
    result.state = ApplyState.APPLIED if not drift else ApplyState.DRIFT
    record_outcome(fabric, parts, result, user)
    return result


def _interrupted(fabric: Fabric, result: ApplyResult, exc: ToolAborted, t0: float) -> ApplyResult:
    """The worker is stopping (:func:`fabric.collectors.tools.abort_all`) in the middle of an apply:
    nothing is recorded (no drift, no alarm, no mail; the partitions keep their stored state, so the
    next start applies and verifies again) and the result says ``pending`` with the reason."""
    result.error = f"interrupted: {exc}"
    result.state = ApplyState.PENDING
    result.seconds = round(time.monotonic() - t0, 3)
    log.info("applying the partitions of %s: %s", fabric.name, result.error)
    return result


def record_failure(fabric: Fabric, parts: list[Partition], result: ApplyResult, user) -> None:
    """Store a failed apply of ``parts`` (``result.error``): the partitions ``failed``, one
    ``partition.apply_failed`` event (its tenant: the partitions it names, see
    :func:`~.common.fabric_event`), an audit entry; in one transaction."""
    log.warning("applying the partitions of %s failed: %s", fabric.name, result.error)
    with transaction.atomic():
        written = {}
        if result.signalled:  # written and signalled, not verified: the file is the one applied
            written = {"applied_hash": result.sha256, "applied_at": timezone.now(), "drift": []}
        Partition.objects.filter(pk__in=[p.pk for p in parts]).update(
            applied_state=ApplyState.FAILED, apply_error=result.error[:2000], **written
        )
        spec = fabric_event(
            fabric, "partition.apply_failed", f"partitions of {fabric.name} not applied: {result.error}",
            {"path": result.path, "error": result.error, "unverified": result.unverified[:20]},
            # the partitions its rows (or a file that could not be generated) name: their tenants'
            parts=parts if result.error.startswith(GENERATE_ERROR) else named_in(parts, result.unverified),
        )  # fmt: skip
        record_events(fabric, [spec])
        audit.record("partition.apply", fabric, {"ok": False, "error": result.error[:500]}, user=user)
        notify_changed(fabric, [spec.code], applied=True)


def record_outcome(fabric: Fabric, parts: list[Partition], result: ApplyResult, user) -> None:
    """Store what the apply found. A partition changed while the apply ran (``updated`` moved on:
    new members, flags) stays ``pending``: the file written was not its current state. A partition
    with GUID members the fabric does not have is ``partial`` (``applied_members`` says "applied to
    N of M members, K not verifiable": :func:`~.verify.member_counts`), never plain ``applied``."""
    now = timezone.now()
    by_pkey: dict[str, list[dict]] = {}
    for d in result.drift:
        by_pkey.setdefault(d["pkey"], []).append(d)
    specs: list[EventSpec] = []
    counts = member_counts(fabric, parts, result.drift)
    tenants = partition_tenants(parts)
    with transaction.atomic():
        for p in parts:
            mine = by_pkey.get(p.pkey_hex, [])
            state = ApplyState.DRIFT if mine else ApplyState.APPLIED
            if not mine and counts[p.pk]["unverifiable"]:
                state = ApplyState.PARTIAL  # never plain "applied" with members it cannot see
            Partition.objects.filter(pk=p.pk, updated=p.updated).update(
                applied_state=state,
                applied_members=counts[p.pk],
                applied_at=now,
                applied_hash=result.sha256,
                drift=mine[:100],
                apply_error="",
            )
            if mine:
                specs.append(
                    EventSpec(
                        code="partition.drift",
                        message=f"partition {p} of {fabric.name}: {len(mine)} sampled port(s) disagree "
                        f"after apply (e.g. {mine[0]['guid']}: expected {mine[0]['expected']}, "
                        f"seen {mine[0]['seen']})",
                        object_type="partition",
                        # the partition, not only its PKey: a PKey freed by job 25 and given to
                        # job 26 is another partition with its own alarm (and clear mail)
                        object_key=f"{fabric.name}:{p.pkey_hex}:{p.name}"[:120],
                        object_repr=str(p),
                        details={"drift": mine[:20]},
                        tenant_id=tenants[p.pk],  # the partition's pool's or job's tenant (issue 22)
                    )
                )
        if not specs:
            specs.append(
                fabric_event(
                    fabric,
                    "partition.applied",
                    f"{len(parts)} partition(s) of {fabric.name} applied ({result.signalled}); "
                    f"{result.checked_ports} port(s) verified",
                    {"sha256": result.sha256, "checked_ports": result.checked_ports, "path": result.path},
                )  # fmt: skip
            )
        record_events(fabric, specs)
        audit.record(
            "partition.apply",
            fabric,
            {"ok": result.ok, "sha256": result.sha256, "drift": len(result.drift), "path": result.path},
            user=user,
        )
        notify_changed(fabric, [s.code for s in specs], applied=True)


def forget_applied(fabric: Fabric, reason: str, *, user=None) -> int:
    """Mark every stored partition of ``fabric`` ``pending``: the SM that ran them is gone and the
    one now serving the fabric (a new lab, an OpenSM recreated with a new partitions file) runs
    none of them yet. A reconcile then compares nothing with that SM until an apply has written
    and verified them (``partition.reconcile_drift`` at start-up was a false alarm, issue 26 §4);
    the caller queues the apply (:func:`~.coalesce.queue_apply`). One transaction, audited
    (``partition.forget_applied`` with ``reason`` and the count). Returns how many partitions
    were marked.
    """
    with transaction.atomic():
        marked = (
            Partition.objects.filter(fabric=fabric)
            .exclude(applied_state=ApplyState.PENDING)
            .update(applied_state=ApplyState.PENDING, drift=[], updated=timezone.now())
        )
        audit.record("partition.forget_applied", fabric, {"reason": reason, "partitions": marked}, user=user)
        if marked:
            notify_changed(fabric, [])
    return marked
