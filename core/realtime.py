"""A small typed producer for Channels groups, used by tasks and services.

Consumers only authenticate, join a group and relay (STYLE.md); everything that sends goes
through :func:`publish`, so each message has a ``type`` the consumers know.

The embedded deployment uses Channels' ``InMemoryChannelLayer``, whose queues belong to the
ASGI server's event loop: a send from a worker thread must run on that loop. Consumers call
:func:`remember_loop` on connect, and :func:`publish` hands the send to that loop with
``run_coroutine_threadsafe``. With the Redis layer a plain ``async_to_sync`` send is used.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from asgiref.sync import async_to_sync
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import InMemoryChannelLayer, get_channel_layer
from redis.exceptions import RedisError

from core.repeatlog import RepeatLog

log = logging.getLogger(__name__)
#: A channel layer that cannot be reached (Redis down or restarting): every websocket attempt and
#: every publish fails the same way. One line each, then a count (issue 22: one traceback per
#: websocket attempt filled the log during a Redis outage).
layer_log = RepeatLog(log)
#: what a channel layer's outage raises: redis-py's errors (connection refused, timeouts, a
#: server loading its data) and the socket's own
LAYER_ERRORS = (RedisError, OSError)
#: close code of a websocket whose push channel is down (RFC 6455 7.4.1: 1011 internal error);
#: the pages' scripts reconnect after a close
CLOSE_LAYER_DOWN = 1011
_server_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def remember_loop() -> None:
    """Record the running event loop as the ASGI server's (call from a consumer's connect)."""
    global _server_loop
    with _loop_lock:
        _server_loop = asyncio.get_running_loop()


def group_name(kind: str, fabric_id: int | str) -> str:
    """Return the Channels group for ``kind`` (``heatmap``, ``alarms``, ...) of one fabric."""
    return f"weft.{kind}.{fabric_id}"


def publish(group: str, message_type: str, payload: dict[str, Any], timeout: float = 5.0) -> bool:
    """Send ``{"type": message_type, "payload": payload}`` to a Channels group.

    ``message_type`` is the consumer handler name with dots (``heatmap.delta`` calls
    ``heatmap_delta``). Returns True when the message was handed to the layer, False when there
    was nobody to send to (in-memory layer and no consumer ever connected, or the server's loop no
    longer running). Never raises for a
    full or absent layer: live updates are best effort, the database is the truth.
    """
    layer = get_channel_layer()
    if layer is None:
        return False
    message = {"type": message_type, "payload": payload}
    try:
        if isinstance(layer, InMemoryChannelLayer):
            loop = _server_loop
            # a loop that is not running (the server stopped: Ctrl-C, while the in-process worker
            # still finishes a task) would never run the send: no one to send to, not a 5 s wait
            # and a traceback per message after "Demo stopped"
            if loop is None or loop.is_closed() or not loop.is_running():
                return False
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                loop.create_task(layer.group_send(group, message))
                return True
            future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop)
            future.result(timeout)
            return True
        async_to_sync(layer.group_send)(group, message)
        return True
    except LAYER_ERRORS as exc:
        layer_log.warning("live updates not published: the channel layer cannot be reached: %s", _brief(exc))
        return False
    except Exception:
        log.warning("publish to %s failed", group, exc_info=True)
        return False


def _brief(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` on one line (the same text for the same outage)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


class ListenOnlyJsonConsumer(AsyncJsonWebsocketConsumer):
    """Base of Weft's push consumers: clients only listen, so binary frames and text that is not
    JSON are ignored (the base class raised, dropping the connection with a server traceback);
    JSON goes to ``receive_json``. A push to a client that has just gone (a tab closed while a
    group message was on its way) is dropped: daphne raises autobahn's ``Disconnected``, which
    used to end the consumer with an ERROR and a 50-line traceback in the log."""

    async def __call__(self, scope, receive, send):
        """The ASGI entry point, with ``send`` guarded (:meth:`guarded`). A channel layer that
        cannot be reached (joining the group, or receiving from it) ends the websocket with
        :data:`CLOSE_LAYER_DOWN` and one WARNING line per outage (:data:`layer_log`), not a
        traceback per attempt."""
        guarded = self.guarded(send)
        try:
            return await super().__call__(scope, receive, guarded)
        except LAYER_ERRORS as exc:
            layer_log.warning("websocket closed: the channel layer cannot be reached: %s", _brief(exc))
            try:
                await guarded({"type": "websocket.close", "code": CLOSE_LAYER_DOWN})
            except Exception:  # the connection is already gone or was never accepted
                pass

    def guarded(self, send):
        """``send`` (the server's ASGI send callable), except that a client gone meanwhile
        (autobahn's ``Disconnected``, raised by daphne's protocol) drops the message with a DEBUG
        line instead of raising; any other error still raises."""

        async def guarded_send(message):
            try:
                await send(message)
            except Exception as exc:
                if type(exc).__name__ != "Disconnected":  # autobahn.exception.Disconnected
                    raise
                log.debug("push to %s dropped: the client has gone", getattr(self, "channel_name", "?"))

        return guarded_send

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        """Clients only listen: binary frames and text that is not JSON are ignored (the base class
        raised, dropping the connection with a server-side traceback)."""
        if text_data is None:
            return
        try:
            content = await self.decode_json(text_data)
        except ValueError:
            return
        await self.receive_json(content)


#: close code of a websocket path no route serves (as the consumers' "no such fabric")
CLOSE_NO_ROUTE = 4404


class NoRouteConsumer(ListenOnlyJsonConsumer):
    """The last websocket route (``weft.asgi``): a path no app serves (``/ws/nope/``,
    ``/ws/alarms/abc/``) is accepted and closed with 4404, as an unknown fabric is; Channels'
    router raised instead, which daphne answered with HTTP 500 and an ERROR traceback."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=CLOSE_NO_ROUTE)
