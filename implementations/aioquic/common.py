"""Shared configuration for the aioquic server and client (interop-runner contract env)."""

from __future__ import annotations

import asyncio
import os
import sys

from aioquic.h3.connection import H3_ALPN
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnectionState
from aioquic.quic.logger import QuicFileLogger

CHUNK = 64 * 1024
# Stream/connection flow-control windows we advertise (aioquic's default is 1 MiB).
MAX_STREAM_DATA = 16 * 2**20
MAX_DATA = 32 * 2**20


def log(msg: str) -> None:
    print(f"aioquic: {msg}", file=sys.stderr, flush=True)


def configuration(is_client: bool) -> QuicConfiguration:
    cfg = QuicConfiguration(is_client=is_client, alpn_protocols=H3_ALPN,
                            max_data=MAX_DATA, max_stream_data=MAX_STREAM_DATA,
                            idle_timeout=30.0)
    # CUBIC unless asked otherwise: the paper runs every stack with CUBIC where it has it
    cfg.congestion_control_algorithm = os.environ.get("PARAM_CONGESTION_CONTROL") or "cubic"
    keylog = os.environ.get("SSLKEYLOGFILE", "")
    if keylog:
        cfg.secrets_log_file = open(keylog, "a", buffering=1)  # noqa: SIM115 (process lifetime)
    qlogdir = os.environ.get("QLOGDIR", "")
    if qlogdir:
        os.makedirs(qlogdir, exist_ok=True)
        cfg.quic_logger = QuicFileLogger(qlogdir)
    return cfg


class Backpressure:
    """Waits until a QUIC stream's send buffer (unsent + unacknowledged bytes) drains.

    aioquic buffers whatever is written to a stream; to stream large files with bounded memory
    the writer waits while the buffer holds more than ``high`` bytes. ``wake()`` is called after
    every transmit (i.e. after each received datagram and timer), when ACKs may have freed room.
    """

    def __init__(self, quic, high: int = 2 * MAX_STREAM_DATA) -> None:
        self._quic = quic
        self._high = high
        self._event = asyncio.Event()

    def buffered(self, stream_id: int) -> int:
        stream = self._quic._streams.get(stream_id)  # aioquic has no public API for this
        return 0 if stream is None else len(stream.sender._buffer)

    def closed(self) -> bool:
        return self._quic._close_event is not None or self._quic._state in (
            QuicConnectionState.CLOSING, QuicConnectionState.DRAINING,
            QuicConnectionState.TERMINATED)

    def wake(self) -> None:
        self._event.set()

    async def wait(self, stream_id: int) -> None:
        while self.buffered(stream_id) > self._high:
            if self.closed():
                raise ConnectionError("connection closed while sending")
            self._event.clear()
            await self._event.wait()
