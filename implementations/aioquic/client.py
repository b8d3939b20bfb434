"""HTTP/3 and hq-interop client on aioquic (contract: REQUESTS, UPLOAD_REQUESTS, DOWNLOADS,
UPLOADS, WORKLOAD, STREAMS, CONNECTIONS, CERTS, ...).

Follows the I/O path of aioquic's examples/http3_client.py: asyncio ``connect()`` with a
QuicConnectionProtocol subclass driving an H3Connection (ALPN h3) or sending "GET /path\r\n"
on raw QUIC streams (ALPN hq-interop, like the example's H0). Downloads (GET) are written to
$DOWNLOADS/<last path segment> as data arrive; uploads (PUT, h3 only) send
$UPLOADS/<last path segment> in chunks as the stream's send buffer drains. CONNECTIONS
connections run in parallel, each with its STREAMS requests per direction at once (one stream
each); any error or non-200 status exits 1. SIGINT (the runner's stop at a duration) closes
the connections and the files, so what arrived by then stays on disk.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.h3.connection import H3Connection, ErrorCode
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.events import (ConnectionTerminated, HandshakeCompleted, QuicEvent,
                                 StreamDataReceived, StreamReset)

from common import (CHUNK, Backpressure, FileSink, Workload, apply_ack_policy,
                    apply_flow_control_window, apply_socket_buffers, configuration, high_water,
                    log, raise_open_files_limit, report_negotiated, workload_from_env)


class Request:
    """One request on a stream of its own; ``done`` resolves once its answer ended."""

    def __init__(self, url: str, loop: asyncio.AbstractEventLoop) -> None:
        self.url = url
        self.status: int | None = None
        self.done: asyncio.Future[None] = loop.create_future()

    @property
    def label(self) -> str:
        """How its log lines name it."""
        return self.url

    def close(self) -> None:
        """Release what it holds open (idempotent): also when stopped by SIGINT."""

    def summary(self) -> str:
        """Its log line once it succeeded."""
        return self.label

    def problem(self) -> str | None:
        return None if self.status == 200 else f"HTTP status {self.status}"

    def finish(self, error: str | None = None) -> None:
        if self.done.done():
            return
        self.close()
        error = error or self.problem()
        if error is not None:
            self.done.set_exception(RuntimeError(f"{self.label}: {error}"))
        else:
            self.done.set_result(None)


class Download(FileSink, Request):
    def __init__(self, url: str, target: Path, loop: asyncio.AbstractEventLoop) -> None:
        Request.__init__(self, url, loop)
        FileSink.__init__(self, target)
        self.target = target

    def summary(self) -> str:
        return f"{self.url}: {self.received} bytes -> {self.target}"


class Upload(Request):
    def __init__(self, url: str, source: Path, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(url, loop)
        self.source = source
        self.size = source.stat().st_size
        self.sent = 0

    @property
    def label(self) -> str:
        return f"PUT {self.url}"

    def problem(self) -> str | None:
        # the server answers only once it has the whole body: an earlier 200 is a bug
        if self.status == 200 and self.sent < self.size:
            return f"answered after {self.sent} of {self.size} bytes"
        return super().problem()

    def summary(self) -> str:
        return f"{self.label}: {self.sent} bytes <- {self.source}"


def request_path(url: str) -> bytes:
    parts = urlsplit(url)
    return (parts.path or "/").encode() + (b"?" + parts.query.encode() if parts.query else b"")


class H3Client(QuicConnectionProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._hq = os.environ.get("ALPN") == "hq-interop"
        self._http = None if self._hq else H3Connection(self._quic)
        self._requests: dict[int, Request] = {}
        self._senders: set[asyncio.Task[None]] = set()
        self._pressure = Backpressure(self._quic, high_water(workload_from_env().streams))
        apply_ack_policy(self._quic)
        apply_flow_control_window(self._quic)

    def transmit(self) -> None:
        super().transmit()
        self._pressure.wake()  # ACKs may have drained an upload's send buffer

    @property
    def _h3(self) -> H3Connection:
        """The HTTP/3 connection (ALPN h3; PUT never runs over hq-interop)."""
        assert self._http is not None
        return self._http

    def _headers(self, url: str, method: bytes, extra: list[tuple[bytes, bytes]],
                 end: bool) -> int:
        """Send a request's headers on a new stream; return the stream."""
        parts = urlsplit(url)
        stream_id = self._quic.get_next_available_stream_id()
        self._h3.send_headers(stream_id, [
            (b":method", method), (b":scheme", parts.scheme.encode()),
            (b":authority", parts.netloc.encode()), (b":path", request_path(url)),
            (b"user-agent", b"qir-aioquic"), *extra,
        ], end_stream=end)
        return stream_id

    def get(self, url: str, target: Path) -> Download:
        dl = Download(url, target, self._loop)
        if self._http is None:  # hq-interop: HTTP/0.9 request, the answer is the raw body
            stream_id = self._quic.get_next_available_stream_id()
            dl.status = 200
            self._quic.send_stream_data(stream_id, f"GET {urlsplit(url).path or '/'}\r\n"
                                        .encode(), end_stream=True)
        else:
            stream_id = self._headers(url, b"GET", [], True)
        self._requests[stream_id] = dl
        self.transmit()
        return dl

    def put(self, url: str, source: Path) -> Upload:
        """Start a PUT of ``source``; its body follows in a task of its own."""
        up = Upload(url, source, self._loop)
        stream_id = self._headers(url, b"PUT", [(b"content-length", str(up.size).encode())],
                                  up.size == 0)
        self._requests[stream_id] = up
        self.transmit()
        if up.size:
            task = asyncio.ensure_future(self._send_body(stream_id, up))
            self._senders.add(task)
            task.add_done_callback(self._senders.discard)
        return up

    async def _send_body(self, stream_id: int, up: Upload) -> None:
        """Feed the file in CHUNKs, each once the stream's send buffer is below its
        high-water mark (aioquic keeps all that is written until it is acknowledged)."""
        try:
            with open(up.source, "rb", buffering=0) as f:
                while up.sent < up.size:
                    await self._pressure.wait(stream_id)
                    if up.done.done() or self._pressure.stopped(stream_id):
                        break
                    data = f.read(CHUNK)
                    if not data:
                        raise OSError(f"{up.source} shrank to {up.sent} bytes")
                    up.sent += len(data)
                    self._h3.send_data(stream_id, data, end_stream=up.sent >= up.size)
                    self.transmit()
        except (ConnectionError, OSError) as exc:
            up.finish(str(exc))
        if up.sent >= up.size or self._pressure.closed():
            return
        if self._pressure.stopped(stream_id):  # the server's STOP_SENDING, maybe no answer
            up.finish(f"server stopped the body after {up.sent} bytes")
            return
        # answered (or failed) before the body was out: stop sending the rest
        self._quic.reset_stream(stream_id, ErrorCode.H3_REQUEST_CANCELLED)
        self.transmit()

    def stop(self) -> None:
        """Stop sending bodies and close the files (what arrived stays): the end of a
        connection, also when SIGINT cancelled the wait for its requests."""
        for task in self._senders:
            task.cancel()
        for request in self._requests.values():
            request.close()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            report_negotiated(self._quic)
        elif isinstance(event, ConnectionTerminated):
            for request in self._requests.values():
                request.finish(f"connection closed: {event.error_code} {event.reason_phrase}")
        elif isinstance(event, StreamReset) and event.stream_id in self._requests:
            self._requests[event.stream_id].finish(f"stream reset ({event.error_code})")
        if self._http is None:
            if isinstance(event, StreamDataReceived):
                self._hq_data(event)
            return
        for h3_event in self._http.handle_event(event):
            self._h3_event(h3_event)

    def _hq_data(self, event: StreamDataReceived) -> None:
        dl = self._requests.get(event.stream_id)
        if isinstance(dl, Download) and not dl.done.done():
            dl.write(event.data)
            if event.end_stream:
                dl.finish()

    def _h3_event(self, event: H3Event) -> None:
        if not isinstance(event, (HeadersReceived, DataReceived)):
            return
        request = self._requests.get(event.stream_id)
        if request is None or request.done.done():
            return
        if isinstance(event, HeadersReceived):
            if request.status is None:
                request.status = int(dict(event.headers).get(b":status", b"0"))
        elif isinstance(event, DataReceived):
            if request.status != 200:
                request.finish()
                return
            if isinstance(request, Download):
                request.write(event.data)
        if event.stream_ended:
            request.finish()


def url_name(url: str) -> str:
    """The file name of a URL: its last path segment."""
    return urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1] or "index.html"


def upload_dir() -> Path:
    return Path(os.environ.get("UPLOADS") or "/uploads")


def origin(urls: list[str]) -> tuple[str, int]:
    """The one (host, port) of a connection's URLs; ValueError when they differ or one is
    not https."""
    origins = set()
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"bad URL {url}")
        origins.add((parts.hostname, parts.port or 443))
    if len(origins) != 1:
        raise ValueError(f"the URLs of one connection go to several servers: {sorted(origins)}")
    return origins.pop()


def per_connection(urls: list[str], workload: Workload) -> list[list[str]]:
    """The URLs of each connection: connection c runs positions c * STREAMS to
    c * STREAMS + STREAMS - 1 of the list."""
    n, streams = workload.connections, workload.streams
    if not urls:
        return [[] for _ in range(n)]
    if len(urls) == streams * n:
        return [urls[c * streams:(c + 1) * streams] for c in range(n)]
    if not os.environ.get("STREAMS") and not os.environ.get("CONNECTIONS"):
        return [urls]  # no workload given (as by a QIR runner): all at once on one connection
    raise ValueError(f"{len(urls)} URLs for {streams} streams x {n} connections")


async def run_connection(gets: list[str], puts: list[str]) -> bool:
    """One connection running its downloads and uploads all at once; True when every one
    succeeded. Each logs one line."""
    host, port = origin(gets + puts)
    downloads = Path(os.environ.get("DOWNLOADS", "/downloads"))
    cfg = configuration(is_client=True)
    cfg.load_verify_locations(cafile=str(Path(os.environ.get("CERTS", "/certs")) / "ca.pem"))
    async with connect(host, port, configuration=cfg, create_protocol=H3Client) as protocol:
        client = cast(H3Client, protocol)
        apply_socket_buffers(client._transport)  # type: ignore[arg-type]
        try:
            requests: list[Request] = [client.get(url, downloads / url_name(url))
                                       for url in gets]
            requests += [client.put(url, upload_dir() / url_name(url)) for url in puts]
            results = await asyncio.gather(*(r.done for r in requests), return_exceptions=True)
        finally:
            client.stop()
    for request, result in zip(requests, results):
        log(str(result) if isinstance(result, BaseException) else request.summary())
    return not any(isinstance(r, BaseException) for r in results)


async def main() -> int:
    workload = workload_from_env()
    gets = os.environ.get("REQUESTS", "").split() if workload.downloads else []
    puts = os.environ.get("UPLOAD_REQUESTS", "").split() if workload.uploads else []
    for name, urls, wanted in (("REQUESTS", gets, workload.downloads),
                               ("UPLOAD_REQUESTS", puts, workload.uploads)):
        if wanted and not urls:
            log(f"{name} is empty")
            return 1
    try:
        plan = list(zip(per_connection(gets, workload), per_connection(puts, workload)))
        for g, p in plan:
            origin(g + p)
    except ValueError as exc:
        log(str(exc))
        return 1
    raise_open_files_limit()
    missing = [url for url in puts if not (upload_dir() / url_name(url)).is_file()]
    if missing:  # before any connection: a clear reason rather than a failed stream
        log(f"no file in {upload_dir()} to upload for {' '.join(missing)}")
        return 1
    results = await asyncio.gather(*(run_connection(g, p) for g, p in plan),
                                   return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            log(f"error: {result!r}")
    return 0 if all(r is True for r in results) else 1


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except KeyboardInterrupt:  # stopped at a duration: the files hold what arrived
        log("stopped by SIGINT")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 (report any failure as exit 1)
        log(f"error: {exc!r}")
        sys.exit(1)
