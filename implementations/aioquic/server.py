"""HTTP/3 and hq-interop file server on aioquic (interop-runner contract: IP, PORT, WWW, ...).

Follows the I/O path of aioquic's examples/http3_server.py: asyncio ``serve()`` with a
QuicConnectionProtocol subclass driving an H3Connection (ALPN h3), or answering HTTP/0.9
requests ("GET /path\r\n") on raw QUIC streams (ALPN hq-interop, like the example's
HttpServerProtocol for H0). Files are streamed in 64 KiB chunks;
the sender waits while the stream's send buffer is above a high-water mark (a share of one
budget per connection with STREAMS streams), so memory stays bounded for files of any size.
An upload (h3 PUT /<name>) is written to $UPLOADS/<name> as its DATA arrive and answered 200
(empty body) once the body ended and the file is closed; a body cut short (reset stream,
closed connection, server stopped) leaves what arrived in the file.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import weakref
from pathlib import Path
from typing import Any

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.h3.connection import H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.events import (ConnectionTerminated, HandshakeCompleted, ProtocolNegotiated,
                                 QuicEvent, StreamDataReceived, StreamReset)

from common import (CHUNK, Backpressure, FileSink, apply_socket_buffers, configuration,
                    high_water, log, raise_open_files_limit, report_negotiated, workload_from_env)

WWW = Path(os.environ.get("WWW", "/www")).resolve()
UPLOADS = os.environ.get("UPLOADS", "")  # empty: this workload has no uploads, PUT is refused


def upload_path(raw: str) -> Path | None:
    """$UPLOADS/<name> for a PUT of /<name>; None for a name that is not one plain file name
    in $UPLOADS (a subdirectory, "..") or when there are no uploads."""
    name = raw.removeprefix("/")
    if not UPLOADS or not name or "/" in name or ".." in name:
        return None
    return Path(UPLOADS) / name


class PutBody(FileSink):
    """An upload's body on its way to $UPLOADS/<name>; ``close`` keeps what arrived."""

    def __init__(self, raw: str, path: Path) -> None:
        # buffered: DATA arrive in packet-sized pieces, one write(2) each would cost more
        super().__init__(path, buffering=CHUNK)
        self.raw = raw
        self.path = path


class H3Server(QuicConnectionProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http: H3Connection | None = None
        self._pressure = Backpressure(self._quic, high_water(workload_from_env().streams))
        self._uploads: dict[int, PutBody] = {}
        self._tasks: set[asyncio.Task] = set()
        self._reset: set[int] = set()
        self._hq = False
        self._requests: dict[int, bytes] = {}

    def transmit(self) -> None:
        super().transmit()
        self._pressure.wake()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, ProtocolNegotiated):
            if event.alpn_protocol == "hq-interop":
                self._hq = True
            else:
                self._http = H3Connection(self._quic)
        elif isinstance(event, StreamDataReceived) and self._hq:
            self._hq_data(event)
        elif isinstance(event, HandshakeCompleted):
            report_negotiated(self._quic)
        elif isinstance(event, StreamReset):
            self._reset.add(event.stream_id)
            self._put_cut(event.stream_id, f"stream reset ({event.error_code})")
        elif isinstance(event, ConnectionTerminated):
            self.close_uploads(f"connection closed ({event.error_code})")
        if self._http is not None:
            for h3_event in self._http.handle_event(event):
                self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        if isinstance(event, HeadersReceived) and event.stream_id not in self._uploads:
            headers = dict(event.headers)
            if headers.get(b":method") == b"PUT":
                self._put_start(event.stream_id, headers, event.stream_ended)
                return
            task = asyncio.ensure_future(self._respond(event.stream_id, headers))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif isinstance(event, DataReceived) and event.stream_id in self._uploads:
            self._uploads[event.stream_id].write(event.data)
            if event.stream_ended:
                self._put_end(event.stream_id)

    def _put_start(self, stream_id: int, headers: dict[bytes, bytes], ended: bool) -> None:
        raw = headers.get(b":path", b"/").decode(errors="replace").split("?", 1)[0]
        path = upload_path(raw)
        if path is None:
            log(f"PUT {raw}: refused (no uploads, or not a plain file name)")
            self._send_headers(stream_id, 403, 0, True)
            return
        try:
            self._uploads[stream_id] = PutBody(raw, path)
        except OSError as exc:
            log(f"PUT {raw}: {exc}")
            self._send_headers(stream_id, 500, 0, True)
            return
        if ended:  # an empty body
            self._put_end(stream_id)

    def _put_end(self, stream_id: int) -> None:
        """The whole body arrived: close the file, and only then answer 200."""
        body = self._uploads.pop(stream_id)
        body.close()
        log(f"PUT {body.raw}: {body.received} bytes -> {body.path}")
        self._send_headers(stream_id, 200, 0, True)

    def _put_cut(self, stream_id: int, why: str) -> None:
        body = self._uploads.pop(stream_id, None)
        if body is not None:
            body.close()
            log(f"PUT {body.raw}: cut short after {body.received} bytes ({why})")

    def close_uploads(self, why: str) -> None:
        """Close every upload still arriving, keeping what arrived."""
        for stream_id in list(self._uploads):
            self._put_cut(stream_id, why)

    def _hq_data(self, event: StreamDataReceived) -> None:
        buf = self._requests.get(event.stream_id, b"") + event.data
        if b"\n" not in buf and not event.end_stream:
            self._requests[event.stream_id] = buf[:4096]
            return
        self._requests.pop(event.stream_id, None)
        line = buf.split(b"\n", 1)[0].strip().decode(errors="replace")
        raw = line[4:] if line.startswith("GET ") else ""
        task = asyncio.ensure_future(self._respond_hq(event.stream_id, raw))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _respond_hq(self, stream_id: int, raw: str) -> None:
        path = (WWW / raw.lstrip("/")).resolve()
        if not raw or WWW not in path.parents or not path.is_file():
            log(f"hq: bad request or no such file {raw!r}")
            self._quic.reset_stream(stream_id, 1)
            self.transmit()
            return
        await self._stream_file(stream_id, path, lambda data, end:
                                self._quic.send_stream_data(stream_id, data, end_stream=end),
                                empty=lambda: self._quic.send_stream_data(stream_id, b"", True))

    async def _stream_file(self, stream_id: int, path: Path, send, empty) -> None:  # type: ignore[no-untyped-def]
        """Send the file in chunks, waiting while the stream's send buffer is full."""
        try:
            with open(path, "rb", buffering=0) as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    empty()
                    self.transmit()
                    return
                sent = 0
                while sent < size:
                    await self._pressure.wait(stream_id)
                    if stream_id in self._reset or self._pressure.closed() \
                            or self._pressure.stopped(stream_id):
                        log(f"stream {stream_id} aborted after {sent} bytes")
                        return
                    data = f.read(CHUNK)
                    if not data:
                        raise OSError(f"{path} shrank to {sent} bytes")
                    sent += len(data)
                    send(data, sent >= size)
                    self.transmit()
        except (ConnectionError, OSError) as exc:
            log(f"stream {stream_id}: {exc}")

    def _send_headers(self, stream_id: int, status: int, length: int | None,
                      end: bool) -> None:
        headers = [(b":status", str(status).encode()), (b"server", b"qir-aioquic")]
        if length is not None:
            headers.append((b"content-length", str(length).encode()))
        self._http.send_headers(stream_id, headers, end_stream=end)
        self.transmit()

    async def _respond(self, stream_id: int, headers: dict[bytes, bytes]) -> None:
        method = headers.get(b":method", b"")
        raw = headers.get(b":path", b"/").decode(errors="replace").split("?", 1)[0]
        path = (WWW / raw.lstrip("/")).resolve()
        if method != b"GET":
            self._send_headers(stream_id, 405, 0, True)
            return
        if WWW not in path.parents or not path.is_file():
            log(f"404 {raw}")
            self._send_headers(stream_id, 404, 0, True)
            return
        size = path.stat().st_size
        self._send_headers(stream_id, 200, size, size == 0)
        if size:
            await self._stream_file(stream_id, path, lambda data, end:
                                    self._http.send_data(stream_id, data, end_stream=end),
                                    empty=lambda: None)


async def main() -> int:
    ip = os.environ.get("IP", "::")
    port = int(os.environ.get("PORT", "4433"))
    certs = Path(os.environ.get("CERTS", "/certs"))
    workload = workload_from_env()
    if workload.uploads:
        if not UPLOADS:
            log(f"UPLOADS is not set for the {workload.kind} workload")
            return 1
        os.makedirs(UPLOADS, exist_ok=True)
        raise_open_files_limit()
    cfg = configuration(is_client=False)
    cfg.load_cert_chain(certs / "cert.pem", certs / "priv.key")
    connections: weakref.WeakSet[H3Server] = weakref.WeakSet()

    def protocol(*args: Any, **kwargs: Any) -> H3Server:
        conn = H3Server(*args, **kwargs)
        connections.add(conn)  # to close the uploads still open when stopped
        return conn

    server = await serve(ip, port, configuration=cfg, create_protocol=protocol)
    apply_socket_buffers(server._transport)  # aioquic exposes no socket options
    log(f"listening on {ip}:{port}, serving {WWW}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for conn in connections:
        conn.close_uploads("server stopped")
    server.close()  # closes connections, so QuicFileLogger writes the qlog files
    await asyncio.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
