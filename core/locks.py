"""Non-overlap locks for periodic tasks: short leases renewed by their holder.

A lock is a lease of ``WEFT_LOCK_TTL_S`` seconds (default 10) that a renewer thread of the holding
process extends every third of that while the ``with`` block runs. A holder that dies (SIGKILL,
OOM killer, a pool child killed at its hard time limit) stops renewing, so its locks are free again
within one TTL instead of the task's whole time limit: a dead worker cannot stop the sweeps of a
fabric for minutes. The lock's token names its holder (host, pid and start time: ``core.procs``),
so a process on the same host that finds the lock held by a process that no longer exists takes it
at once: the task Celery puts back after its pool process died runs again without waiting for the
lease. A holder that is still running after ``limit_s`` stops renewing (the lock then expires
within one TTL), so a wedged but living process does not block the others forever.

Backends: Redis when ``REDIS_URL`` is set (one key per lock, ``SET NX PX`` to take it, and
redis-py's token-checked ``Lock.extend``/``release`` Lua scripts, so a holder never renews or
deletes a lock that expired and was taken by another); otherwise a process-local table (the
embedded deployment runs worker and beat in one process).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from django.conf import settings

from core.procs import hostname, is_alive, owner_tag

log = logging.getLogger(__name__)

PREFIX = "weft:lock:"


def lock_ttl_s() -> float:
    """The lease length in seconds (``settings.WEFT_LOCK_TTL_S``, at least 1)."""
    return settings.WEFT_LOCK_TTL_S


# -- backends -------------------------------------------------------------------------------------


class _LocalBackend:
    """Leases in this process (``{name: (token, expires monotonic)}``)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held: dict[str, tuple[str, float]] = {}

    def acquire(self, name: str, token: str, ttl: float) -> bool:
        now = time.monotonic()
        with self._mutex:
            held = self._held.get(name)
            if held is not None and held[1] > now:
                return False
            self._held[name] = (token, now + ttl)
            return True

    def extend(self, name: str, token: str, ttl: float) -> bool:
        now = time.monotonic()
        with self._mutex:
            held = self._held.get(name)
            if held is None or held[0] != token or held[1] <= now:
                return False
            self._held[name] = (token, now + ttl)
            return True

    def release(self, name: str, token: str) -> None:
        with self._mutex:
            held = self._held.get(name)
            if held is not None and held[0] == token:
                del self._held[name]

    def ttl(self, name: str) -> float | None:
        with self._mutex:
            held = self._held.get(name)
        left = held[1] - time.monotonic() if held else 0.0
        return left if left > 0 else None


class _RedisBackend:
    """Leases in Redis: ``SET name token NX PX ttl``; renew/release only with the same token."""

    def __init__(self, url: str) -> None:
        import redis

        self._redis = redis.Redis.from_url(url)
        self._locks: dict[tuple[str, str], object] = {}
        self._mutex = threading.Lock()

    def _lock(self, name: str, token: str, ttl: float):
        # redis-py's Lock only for its token-checked Lua scripts (extend, release).
        from redis.lock import Lock

        # thread_local=False: the renewer thread extends what the task's thread acquired.
        lock = Lock(self._redis, name, timeout=ttl, blocking=False, thread_local=False)
        lock.local.token = token.encode()
        return lock

    def acquire(self, name: str, token: str, ttl: float) -> bool:
        if self._redis.set(name, token, nx=True, px=int(ttl * 1000)):
            return True
        held = self._redis.get(name)
        holder = held.decode(errors="replace") if held else ""
        if not holder or not _holder_dead(holder):
            return False
        log.warning("lock %s: its holder %s is gone; taking the lock over", name, holder.rsplit("|", 1)[0])
        self.release(name, holder)  # token-checked: only that dead holder's lease is deleted
        return bool(self._redis.set(name, token, nx=True, px=int(ttl * 1000)))

    def extend(self, name: str, token: str, ttl: float) -> bool:
        from redis.exceptions import LockError

        try:
            return bool(self._lock(name, token, ttl).extend(ttl, replace_ttl=True))
        except LockError:  # LockNotOwnedError: expired (and maybe taken by another holder)
            return False

    def release(self, name: str, token: str) -> None:
        from redis.exceptions import LockError

        with contextlib.suppress(LockError):
            self._lock(name, token, 1).release()

    def ttl(self, name: str) -> float | None:
        ms = self._redis.pttl(name)
        return ms / 1000 if ms and ms > 0 else None


_backend: _LocalBackend | _RedisBackend | None = None
_backend_key: str | None = None
_backend_mutex = threading.Lock()


def _get_backend() -> _LocalBackend | _RedisBackend:
    global _backend, _backend_key
    url = settings.REDIS_URL or ""
    with _backend_mutex:
        if _backend is None or _backend_key != url:
            _backend = _RedisBackend(url) if url else _LocalBackend()
            _backend_key = url
        return _backend


def _token() -> str:
    """``<host>|<pid>:<start time>|<random>``: who holds a lock, and unique per acquisition."""
    return f"{hostname()}|{owner_tag()}|{uuid.uuid4().hex}"


def _holder_dead(token: str) -> bool:
    """Whether ``token`` names a process of this host that no longer exists."""
    parts = token.split("|")
    return len(parts) == 3 and parts[0] == hostname() and not is_alive(parts[1])


# -- the renewer ----------------------------------------------------------------------------------


@dataclass(eq=False)
class _Lease:
    name: str
    token: str
    ttl: float
    until: float  # monotonic: stop renewing after this (the holder's limit_s)


class _Renewer:
    """One daemon thread per process that extends every held lease every third of its TTL."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._leases: set[_Lease] = set()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, lease: _Lease) -> None:
        with self._mutex:
            self._leases.add(lease)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="weft-lock-renewer", daemon=True)
                self._thread.start()
        self._wake.set()

    def remove(self, lease: _Lease) -> None:
        with self._mutex:
            self._leases.discard(lease)

    def _run(self) -> None:
        while True:
            with self._mutex:
                leases = list(self._leases)
            if not leases:
                with self._mutex:
                    if not self._leases:
                        self._thread = None
                        return
                continue
            interval = min(lease.ttl for lease in leases) / 3
            self._wake.wait(interval)
            self._wake.clear()
            now = time.monotonic()
            with self._mutex:
                leases = list(self._leases)
            for lease in leases:
                if now >= lease.until:
                    log.warning(
                        "lock %s: holder still running after its limit; no longer renewed (expires in %g s)",
                        lease.name,
                        lease.ttl,
                    )
                    self.remove(lease)
                    continue
                try:
                    ok = _get_backend().extend(lease.name, lease.token, lease.ttl)
                except Exception as exc:  # Redis briefly away: try again next round, the lease may survive
                    log.warning("lock %s: renewal failed: %s", lease.name, exc)
                    continue
                if not ok:
                    with self._mutex:
                        released = lease not in self._leases
                    if released:  # its holder released it while this round ran: not lost
                        continue
                    log.error(
                        "lock %s expired while held (process stalled longer than %g s)", lease.name, lease.ttl
                    )
                    self.remove(lease)

    def reset_after_fork(self) -> None:
        # The thread does not exist in a forked child, and the leases are the parent's.
        self._mutex = threading.Lock()
        self._leases = set()
        self._wake = threading.Event()
        self._thread = None


_renewer = _Renewer()
os.register_at_fork(after_in_child=_renewer.reset_after_fork)


@contextlib.contextmanager
def single_instance(key: str, limit_s: float | None = None, *, ttl_s: float | None = None) -> Iterator[bool]:
    """Hold the lock ``key`` while the ``with`` block runs.

    Yields True when this caller holds the lock, False when another holder has it (the caller
    should then skip its work). The lease (``ttl_s``, default ``WEFT_LOCK_TTL_S`` seconds) is
    renewed by this process until the block ends or ``limit_s`` seconds have passed (None: no
    limit); the lock is released at the end. A holder that dies frees the lock within one lease.

    Raises whatever the backend raises when the lock cannot be taken (e.g. ``redis.ConnectionError``).
    """
    ttl = float(ttl_s) if ttl_s is not None else lock_ttl_s()
    name = PREFIX + key
    token = _token()
    backend = _get_backend()
    acquired = backend.acquire(name, token, ttl)
    lease = None
    if acquired:
        until = time.monotonic() + float(limit_s) if limit_s else float("inf")
        lease = _Lease(name, token, ttl, until)
        _renewer.add(lease)
    try:
        yield acquired
    finally:
        if lease is not None:
            _renewer.remove(lease)
            try:
                backend.release(name, token)
            except Exception as exc:  # the lease expires by itself within one TTL
                log.warning("lock %s: release failed: %s", name, exc)


def lock_remaining_s(key: str) -> float | None:
    """Seconds until the lock ``key`` expires, None when nobody holds it (for tests and diagnostics)."""
    return _get_backend().ttl(PREFIX + key)
