"""Shared configuration for the aioquic server and client (interop-runner contract env)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from aioquic.h3.connection import H3_ALPN
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnectionState
from aioquic.quic.logger import QuicFileLogger
from aioquic.tls import CipherSuite

CHUNK = 64 * 1024
# Stream/connection flow-control windows we advertise (aioquic's default is 1 MiB).
MAX_STREAM_DATA = 16 * 2**20
MAX_DATA = 32 * 2**20
# What one connection's sending streams may hold unsent or unacknowledged, all together; a
# single stream gets all of it (as before workloads), STREAMS streams an equal share each, so
# memory stays bounded with 64 streams as it is with one.
SEND_BUDGET = 2 * MAX_STREAM_DATA
WORKLOAD_KINDS = ("download", "upload", "bidirectional")


def log(msg: str) -> None:
    print(f"aioquic: {msg}", file=sys.stderr, flush=True)


def configuration(is_client: bool) -> QuicConfiguration:
    alpn = os.environ.get("ALPN") or "h3"
    # the client's fixed window (FLOW_CONTROL_WINDOW) is its initial credit too
    window = flow_control_window() if is_client else None
    cfg = QuicConfiguration(is_client=is_client,
                            alpn_protocols=H3_ALPN if alpn == "h3" else [alpn],
                            max_data=window or MAX_DATA,
                            max_stream_data=window or MAX_STREAM_DATA,
                            idle_timeout=30.0)
    # CUBIC unless asked otherwise: the paper runs every stack with CUBIC where it has it;
    # aioquic 1.7.2 has reno and cubic (no BBR: the runner records that request as unhonoured)
    cc = os.environ.get("CONGESTION_CONTROL") or "cubic"
    cfg.congestion_control_algorithm = cc if cc in ("reno", "cubic") else "cubic"
    cipher = os.environ.get("CIPHER", "")
    if cipher:
        cfg.cipher_suites = [CipherSuite[cipher.removeprefix("TLS_")]]
    keylog = os.environ.get("SSLKEYLOGFILE", "")
    if keylog:
        cfg.secrets_log_file = open(keylog, "a", buffering=1)  # noqa: SIM115 (process lifetime)
    qlogdir = os.environ.get("QLOGDIR", "")
    if qlogdir:
        os.makedirs(qlogdir, exist_ok=True)
        cfg.quic_logger = QuicFileLogger(qlogdir)
    return cfg


@dataclass(frozen=True)
class Workload:
    """WORKLOAD, STREAMS and CONNECTIONS of the contract (docs/implementations.md, Workloads):
    which way the bodies go, on how many streams per connection and direction, and on how
    many parallel client connections."""

    kind: str
    streams: int
    connections: int

    @property
    def downloads(self) -> bool:
        return self.kind != "upload"

    @property
    def uploads(self) -> bool:
        return self.kind != "download"


def _whole(env: str) -> int:
    """A count of the contract (empty: 1); not a whole number >= 1: exit 1, as
    qir_check_workload does."""
    value = os.environ.get(env) or "1"
    if not value.isdigit() or int(value) < 1:
        log(f"STREAMS and CONNECTIONS must be whole numbers >= 1, not {env}={value!r}")
        sys.exit(1)
    return int(value)


def workload_from_env() -> Workload:
    """The workload asked for; one this harness cannot run exits 127 ("unsupported")."""
    kind = os.environ.get("WORKLOAD") or "download"
    if kind not in WORKLOAD_KINDS:
        log(f"unsupported workload {kind!r} (it runs: {', '.join(WORKLOAD_KINDS)})")
        sys.exit(127)
    workload = Workload(kind, _whole("STREAMS"), _whole("CONNECTIONS"))
    # HTTP/0.9 has a request line and nothing else: nowhere to put an upload's body
    if workload.uploads and os.environ.get("ALPN") == "hq-interop":
        log(f"unsupported workload {kind} over hq-interop: hq-interop requests carry no body")
        sys.exit(127)
    return workload


def raise_open_files_limit() -> None:
    """Lift the soft limit of open files to the hard one: every transfer keeps its file open,
    64 streams x 16 connections x 2 directions are 2048 files, above the usual soft 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (OSError, ValueError) as exc:
            log(f"open files limit stays {soft}: {exc}")


def high_water(streams: int) -> int:
    """The send buffer one of ``streams`` concurrent streams may hold (a share of
    SEND_BUDGET, at least a few chunks so that each stream keeps data in flight)."""
    return max(4 * CHUNK, SEND_BUDGET // streams)


class Backpressure:
    """Waits until a QUIC stream's send buffer (unsent + unacknowledged bytes) drains.

    aioquic buffers whatever is written to a stream; to stream large files with bounded memory
    the writer waits while the buffer holds more than ``high`` bytes. ``wake()`` is called after
    every transmit (i.e. after each received datagram and timer), when ACKs may have freed room;
    it resumes only the writers whose stream has room (or all once the connection closes):
    waking all of a connection's STREAMS writers after every datagram kept the event loop so
    busy that it read ACKs too late and dropped them (64 streams x 16 connections stalled).
    """

    def __init__(self, quic, high: int = SEND_BUDGET) -> None:  # type: ignore[no-untyped-def]
        self._quic = quic
        self._high = high
        self._waiting: dict[int, asyncio.Future[None]] = {}  # one writer per stream

    def buffered(self, stream_id: int) -> int:
        stream = self._quic._streams.get(stream_id)  # aioquic has no public API for this
        # a reset stream (the peer's STOP_SENDING) sends nothing more: nothing to wait for
        if stream is None or self.stopped(stream_id):
            return 0
        return len(stream.sender._buffer)

    def stopped(self, stream_id: int) -> bool:
        """The stream's sending part was reset (by us or the peer's STOP_SENDING): aioquic
        refuses further writes."""
        stream = self._quic._streams.get(stream_id)
        return stream is not None and stream.sender._reset_error_code is not None

    def closed(self) -> bool:
        return self._quic._close_event is not None or self._quic._state in (
            QuicConnectionState.CLOSING, QuicConnectionState.DRAINING,
            QuicConnectionState.TERMINATED)

    def wake(self) -> None:
        if not self._waiting:
            return
        closed = self.closed()
        for stream_id, waiter in list(self._waiting.items()):
            if closed or self.buffered(stream_id) <= self._high:
                del self._waiting[stream_id]
                if not waiter.done():  # done: its writer was cancelled
                    waiter.set_result(None)

    async def wait(self, stream_id: int) -> None:
        while self.buffered(stream_id) > self._high:
            if self.closed():
                raise ConnectionError("connection closed while sending")
            waiter = asyncio.get_running_loop().create_future()
            self._waiting[stream_id] = waiter
            await waiter


def report_negotiated(quic) -> None:  # type: ignore[no-untyped-def]
    """Print the QIR_NEGOTIATED line from aioquic's own state after the handshake."""
    info = {"alpn": quic.tls.alpn_negotiated}
    schedule = getattr(quic.tls, "key_schedule", None)  # no public API for the suite
    if schedule is not None:
        info["cipher"] = "TLS_" + CipherSuite(schedule.cipher_suite).name
    cc = getattr(getattr(quic, "_loss", None), "_cc", None)
    if cc is not None:
        info["congestion_control"] = type(cc).__name__.removesuffix("CongestionControl").lower()
    print("QIR_NEGOTIATED " + json.dumps(info), file=sys.stderr, flush=True)


def apply_socket_buffers(transport: asyncio.BaseTransport) -> None:
    """SO_RCVBUF/SO_SNDBUF from SOCKET_RCVBUF/SOCKET_SNDBUF (bytes) on the UDP socket."""
    sock = transport.get_extra_info("socket")
    for env, opt in (("SOCKET_RCVBUF", socket.SO_RCVBUF), ("SOCKET_SNDBUF", socket.SO_SNDBUF)):
        value = os.environ.get(env, "")
        if value and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, opt, int(value))
            log(f"{env}={value}: kernel reports {sock.getsockopt(socket.SOL_SOCKET, opt)}")


# What aioquic 1.7.2 advertises as max_ack_delay (QuicConnection._serialize_transport_parameters)
ADVERTISED_MAX_ACK_DELAY_MS = 25


def ack_policy_from_env() -> tuple[int | None, float | None]:
    """(ACK_RATIO, MAX_ACK_DELAY_MS in seconds) of the contract; None where unset. A delay
    above the 25 ms aioquic advertises to its peer cannot be honoured: exit 127."""
    ratio = os.environ.get("ACK_RATIO") or None
    delay_ms = os.environ.get("MAX_ACK_DELAY_MS") or None
    if delay_ms is not None and int(delay_ms) > ADVERTISED_MAX_ACK_DELAY_MS:
        log(f"unsupported MAX_ACK_DELAY_MS={delay_ms}: aioquic advertises max_ack_delay "
            f"{ADVERTISED_MAX_ACK_DELAY_MS} ms and has no setting for it")
        sys.exit(127)
    return (None if ratio is None else int(ratio),
            None if delay_ms is None else int(delay_ms) / 1000)


def apply_ack_policy(quic) -> None:  # type: ignore[no-untyped-def]
    """The client's ACK frequency (ACK_RATIO, MAX_ACK_DELAY_MS). aioquic has no API for it:
    its policy is one ACK ``_ack_delay`` (1 ms, K_GRANULARITY) after the first unacknowledged
    ack-eliciting packet. MAX_ACK_DELAY_MS sets that delay; ACK_RATIO=n makes every n-th
    ack-eliciting 1-RTT packet's ACK due at once, the rest after the delay (default: the 25 ms
    it advertises). Private attributes of aioquic 1.7.2's QuicConnection: _ack_delay, _spaces,
    _payload_received, _write_ack_frame."""
    ratio, delay = ack_policy_from_env()
    if delay is not None:
        quic._ack_delay = delay
    if ratio is None:
        return
    from aioquic import tls

    if delay is None:
        quic._ack_delay = ADVERTISED_MAX_ACK_DELAY_MS / 1000
    one_rtt = tls.Epoch.ONE_RTT
    count = 0
    payload_received, write_ack_frame = quic._payload_received, quic._write_ack_frame

    def counted_payload_received(context, plain, crypto_frame_required=False):  # type: ignore[no-untyped-def]
        nonlocal count
        eliciting, probing = payload_received(context, plain,
                                              crypto_frame_required=crypto_frame_required)
        if eliciting and context.epoch == one_rtt:
            count += 1
            if count >= ratio:  # due now: the transmit() after this datagram sends it
                quic._spaces[one_rtt].ack_at = context.time
        return eliciting, probing

    def counting_write_ack_frame(builder, space, now):  # type: ignore[no-untyped-def]
        nonlocal count
        if space is quic._spaces.get(one_rtt):
            count = 0
        write_ack_frame(builder=builder, space=space, now=now)

    quic._payload_received = counted_payload_received
    quic._write_ack_frame = counting_write_ack_frame
    log(f"ACK policy: every {ratio}. ack-eliciting packet, else after "
        f"{quic._ack_delay * 1000:g} ms")


# A fixed window is granted again once this share of it was consumed since the last grant
# (quic-go's WindowUpdateThreshold), so that not every packet carries a credit update.
WINDOW_UPDATE_SHARE = 0.25


def flow_control_window() -> int | None:
    """FLOW_CONTROL_WINDOW of the contract (bytes), None where unset; not a whole number of
    bytes above 0: exit 1."""
    value = os.environ.get("FLOW_CONTROL_WINDOW") or None
    if value is None:
        return None
    if not value.isdigit() or int(value) <= 0:
        log(f"FLOW_CONTROL_WINDOW must be a number of bytes above 0, not {value!r}")
        sys.exit(1)
    return int(value)


def sliding_credit(consumed: int, window: int, granted: int) -> int:
    """The credit (an absolute offset) to grant at a fixed ``window``: ``consumed`` +
    ``window`` once a WINDOW_UPDATE_SHARE of the window was consumed since the last grant
    (``granted``), else ``granted``: the sender never has more than ``window`` bytes beyond
    what the client consumed."""
    credit = consumed + window
    return credit if credit - granted >= window * WINDOW_UPDATE_SHARE else granted


def apply_flow_control_window(quic) -> None:  # type: ignore[no-untyped-def]
    """The client's fixed flow-control window (FLOW_CONTROL_WINDOW) for the connection and
    every stream. aioquic 1.7.2 starts from QuicConfiguration's max_data / max_stream_data
    (:func:`configuration` sets both to the window) and doubles a credit whenever more than
    half of it is used (QuicConnection._write_connection_limits, _write_stream_limits), so its
    window has no bound. Here the credit slides instead: bytes consumed + window
    (:func:`sliding_credit`). Private parts of aioquic 1.7.2: Limit, _local_max_data,
    _write_stream_limits, _on_max_stream_data_delivery, _quic_logger."""
    window = flow_control_window()
    if window is None:
        return
    from aioquic.quic import connection
    from aioquic.quic.packet import QuicFrameType

    class FixedWindowLimit(connection.Limit):
        """MAX_DATA at a fixed window: ``value`` (what _write_connection_limits sends when it
        differs from ``sent``) slides with the bytes received, and its doubling is ignored."""

        @property  # type: ignore[override]
        def value(self) -> int:
            return sliding_credit(self.used, window, self.sent)

        @value.setter
        def value(self, _doubled: int) -> None:
            pass

    limit = quic._local_max_data
    quic._local_max_data = FixedWindowLimit(limit.frame_type, limit.name, limit.sent)

    def write_stream_limits(builder, space, stream) -> None:  # type: ignore[no-untyped-def]
        if not stream.max_stream_data_local:  # a stream the client only sends on
            return
        stream.max_stream_data_local = sliding_credit(
            stream.receiver.starting_offset(), window, stream.max_stream_data_local)
        if stream.max_stream_data_local_sent == stream.max_stream_data_local:
            return
        buf = builder.start_frame(QuicFrameType.MAX_STREAM_DATA,
                                  capacity=connection.MAX_STREAM_DATA_FRAME_CAPACITY,
                                  handler=quic._on_max_stream_data_delivery,
                                  handler_args=(stream,))
        buf.push_uint_var(stream.stream_id)
        buf.push_uint_var(stream.max_stream_data_local)
        stream.max_stream_data_local_sent = stream.max_stream_data_local
        if quic._quic_logger is not None:
            builder.quic_logger_frames.append(quic._quic_logger.encode_max_stream_data_frame(
                maximum=stream.max_stream_data_local, stream_id=stream.stream_id))

    quic._write_stream_limits = write_stream_limits
    log(f"flow-control window fixed at {window} bytes (connection and streams)")


class FileSink:
    """A body written to a file as it arrives, its bytes counted (a download on the client,
    an upload on the server); ``close`` keeps what arrived."""

    def __init__(self, path: Path, buffering: int = -1) -> None:
        self.file: BinaryIO = open(path, "wb", buffering=buffering)  # noqa: SIM115 (close)
        self.received = 0

    def write(self, data: bytes) -> None:
        self.file.write(data)
        self.received += len(data)

    def close(self) -> None:
        self.file.close()
