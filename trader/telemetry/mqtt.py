"""The MQTT link: events out through bounded queues, signed commands in.

`publish` never waits: an event joins a bounded queue, trading events one of their own
(`event_queues`), and when a queue is full its oldest event is dropped and counted. One task
keeps the connection up, reconnecting with exponential backoff and jitter; while the broker is
away events wait in the queues (and the oldest are dropped), so a broker outage never touches
trading. The current status is kept apart from the queues and published, retained, on every
(re)connect; the broker holds a last will that marks the instance offline if the connection
dies without a goodbye.
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets
import ssl
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import Any

import aiomqtt

from trader.config.daemon_settings import MqttSettings
from trader.logging import get_logger
from trader.telemetry.event_queues import EventQueues
from trader.telemetry.events import Event, offline_will

PUBLISH_TIMEOUT_S = 10.0
FIRST_RETRY_DELAY_S = 0.5


def base_topic(settings: MqttSettings, instance: str) -> str:
    """Where an instance's topics live: `<prefix>/<instance>`."""
    return f"{settings.topic_prefix}/{instance}"


class MqttLink:
    def __init__(
        self,
        settings: MqttSettings,
        instance: str,
        *,
        on_connected: Callable[[bool], None] = lambda up: None,
        on_dropped: Callable[[str, int], None] = lambda queue, n: None,
        on_command: Callable[[bytes], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        self.settings = settings
        self.instance = instance
        self.base = base_topic(settings, instance)
        self._on_connected = on_connected
        self._on_command = on_command if settings.commands_enabled else None
        self._pending = EventQueues(settings.queue_size, on_dropped)
        self._wakeup = asyncio.Event()
        self._status: Event | None = None
        self._status_dirty = asyncio.Event()
        self._connected = False
        self._drained = asyncio.Event()  # set while the sender has nothing left to send
        self._commands: set[asyncio.Task[None]] = set()
        self._log = get_logger("trader.mqtt", broker=f"{settings.host}:{settings.port}")
        # One identity per process: a restarted daemon must not take over (and so fire the
        # will of) a session that is still being torn down.
        self._identifier = f"trader-{instance}-{os.getpid()}-{secrets.token_hex(3)}"

    @property
    def connected(self) -> bool:
        return self._connected

    def topic(self, relative: str) -> str:
        return f"{self.base}/{relative}"

    # --- the tick's side: never waits -------------------------------------------------------

    def publish(self, event: Event) -> None:
        self._pending.put(event)
        self._drained.clear()
        self._wakeup.set()

    def queued(self) -> list[Event]:
        """The events waiting to be sent, oldest first."""
        return list(self._pending)

    def set_status(self, event: Event) -> None:
        """The retained status: published now if connected, and again on every reconnect."""
        self._status = event
        self._status_dirty.set()
        self._drained.clear()
        self._wakeup.set()

    # --- the connection ---------------------------------------------------------------------

    def _client(self) -> aiomqtt.Client:
        s = self.settings
        will = offline_will(self.instance)
        tls: ssl.SSLContext | None = None
        if s.tls:
            tls = ssl.create_default_context(cafile=str(s.ca_file) if s.ca_file else None)
            if s.cert_file is not None:
                tls.load_cert_chain(str(s.cert_file), str(s.key_file) if s.key_file else None)
        return aiomqtt.Client(
            s.host,
            s.port,
            username=s.username,
            password=s.password.get_secret_value() if s.password else None,
            identifier=self._identifier,
            will=aiomqtt.Will(self.topic(will.topic), will.payload(), qos=1, retain=True),
            tls_context=tls,
            keepalive=30,
            timeout=PUBLISH_TIMEOUT_S,
        )

    async def run(self) -> None:
        """Keep the link up until cancelled."""
        delay = FIRST_RETRY_DELAY_S
        while True:
            try:
                async with self._client() as client:
                    self._set_connected(True)
                    delay = FIRST_RETRY_DELAY_S
                    await self._serve(client)
            except aiomqtt.MqttError as error:
                # Never the password: aiomqtt's errors name codes and reasons only.
                self._log.warning(
                    "mqtt unavailable", error=str(error)[:200], retry_in_s=round(delay, 2)
                )
            except OSError as error:  # TLS and socket errors
                self._log.warning(
                    "mqtt unavailable", error=repr(error)[:200], retry_in_s=round(delay, 2)
                )
            except Exception:
                # The link must outlive anything: log it and connect again.
                self._log.exception("mqtt link failed", retry_in_s=round(delay, 2))
            finally:
                self._set_connected(False)
            # Full jitter above half the delay: many daemons do not reconnect in step.
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))  # noqa: S311 - jitter, not a secret
            delay = min(delay * 2, self.settings.reconnect_max_delay_s)

    def _set_connected(self, up: bool) -> None:
        if up != self._connected:
            self._connected = up
            self._on_connected(up)
            if up:
                self._log.info("mqtt connected")

    async def _serve(self, client: aiomqtt.Client) -> None:
        self._status_dirty.set()  # the status goes first on every connection
        self._drained.clear()
        if self._on_command is not None:
            await client.subscribe(self.topic("cmd"), qos=1)
        # Whichever of sending and receiving fails first ends the connection; its error (an
        # MqttError, not an ExceptionGroup) is what `run` reconnects on.
        tasks = {
            asyncio.create_task(self._send(client)),
            asyncio.create_task(self._receive(client)),
        }
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            task.result()
        raise aiomqtt.MqttError("the connection ended")

    async def _send(self, client: aiomqtt.Client) -> None:
        while True:
            if self._status_dirty.is_set() and self._status is not None:
                self._status_dirty.clear()
                await self._put(client, self._status)
                continue
            event = self._pending.oldest()
            if event is None:
                self._wakeup.clear()
                self._drained.set()
                await self._wakeup.wait()
                continue
            await self._put(client, event)
            # Taken off only once the broker has it: a disconnect mid-send keeps it queued.
            self._pending.remove(event)

    async def _put(self, client: aiomqtt.Client, event: Event) -> None:
        await client.publish(
            self.topic(event.topic), event.payload(), qos=event.qos, retain=event.retain
        )

    async def _receive(self, client: aiomqtt.Client) -> None:
        # Iterating also notices a dead connection while nothing is being sent.
        async for message in client.messages:
            if self._on_command is None:
                continue
            # Every payload is handed on (aiomqtt types it as bytes), an empty one included:
            # each gets an answer.
            task = asyncio.create_task(self._on_command(bytes(message.payload)))
            self._commands.add(task)
            task.add_done_callback(self._commands.discard)

    async def close(self, final: Event | None, deadline_s: float = 3.0) -> None:
        """Send `final` (the retained goodbye status) and what is queued, within the deadline;
        then disconnect cleanly, so the broker does not publish the will."""
        if final is not None:
            self.set_status(final)
        if self._connected:
            with suppress(TimeoutError):
                async with asyncio.timeout(deadline_s):
                    await self._drained.wait()
        self._pending.drop_all()
        for task in list(self._commands):
            task.cancel()
