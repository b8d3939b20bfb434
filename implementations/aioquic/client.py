"""HTTP/3 and hq-interop download client on aioquic (contract: REQUESTS, DOWNLOADS, CERTS, ...).

Follows the I/O path of aioquic's examples/http3_client.py: asyncio ``connect()`` with a
QuicConnectionProtocol subclass driving an H3Connection (ALPN h3) or sending "GET /path\r\n"
on raw QUIC streams (ALPN hq-interop, like the example's H0). Bodies are written to
$DOWNLOADS/<last path segment> as data arrives; any error or non-200 status exits 1.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.h3.connection import H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.events import (ConnectionTerminated, HandshakeCompleted, QuicEvent,
                                 StreamDataReceived, StreamReset)

from common import (apply_ack_policy, apply_flow_control_window, apply_socket_buffers,
                    configuration, log, report_negotiated)


class Download:
    def __init__(self, url: str, target: Path, loop: asyncio.AbstractEventLoop) -> None:
        self.url = url
        self.target = target
        self.file = open(target, "wb")  # noqa: SIM115 (closed in finish)
        self.status: int | None = None
        self.received = 0
        self.done: asyncio.Future[None] = loop.create_future()

    def finish(self, error: str | None = None) -> None:
        if self.done.done():
            return
        self.file.close()
        if error is not None:
            self.done.set_exception(RuntimeError(f"{self.url}: {error}"))
        elif self.status != 200:
            self.done.set_exception(RuntimeError(f"{self.url}: HTTP status {self.status}"))
        else:
            self.done.set_result(None)


class H3Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._hq = os.environ.get("ALPN") == "hq-interop"
        self._http = None if self._hq else H3Connection(self._quic)
        self._downloads: dict[int, Download] = {}
        apply_ack_policy(self._quic)
        apply_flow_control_window(self._quic)

    def get(self, url: str, target: Path) -> Download:
        parts = urlsplit(url)
        stream_id = self._quic.get_next_available_stream_id()
        dl = Download(url, target, self._loop)
        self._downloads[stream_id] = dl
        if self._http is None:  # hq-interop: HTTP/0.9 request, the answer is the raw body
            dl.status = 200
            self._quic.send_stream_data(stream_id, f"GET {parts.path or '/'}\r\n".encode(),
                                        end_stream=True)
            self.transmit()
            return dl
        self._http.send_headers(stream_id, [
            (b":method", b"GET"), (b":scheme", parts.scheme.encode()),
            (b":authority", parts.netloc.encode()),
            (b":path", (parts.path or "/").encode() + (b"?" + parts.query.encode()
                                                         if parts.query else b"")),
            (b"user-agent", b"qir-aioquic"),
        ], end_stream=True)
        self.transmit()
        return dl

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            report_negotiated(self._quic)
        elif isinstance(event, ConnectionTerminated):
            for dl in self._downloads.values():
                dl.finish(f"connection closed: {event.error_code} {event.reason_phrase}")
        elif isinstance(event, StreamReset) and event.stream_id in self._downloads:
            self._downloads[event.stream_id].finish(f"stream reset ({event.error_code})")
        if self._http is None:
            if isinstance(event, StreamDataReceived):
                dl = self._downloads.get(event.stream_id)
                if dl is not None and not dl.done.done():
                    dl.file.write(event.data)
                    dl.received += len(event.data)
                    if event.end_stream:
                        dl.finish()
            return
        for h3_event in self._http.handle_event(event):
            self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        dl = self._downloads.get(getattr(event, "stream_id", -1))
        if dl is None or dl.done.done():
            return
        if isinstance(event, HeadersReceived):
            if dl.status is None:
                dl.status = int(dict(event.headers).get(b":status", b"0"))
        elif isinstance(event, DataReceived):
            if dl.status != 200:
                dl.finish()
                return
            dl.file.write(event.data)
            dl.received += len(event.data)
        if event.stream_ended:
            dl.finish()


async def main() -> int:
    urls = os.environ.get("REQUESTS", "").split()
    if not urls:
        log("REQUESTS is empty")
        return 1
    downloads = Path(os.environ.get("DOWNLOADS", "/downloads"))
    certs = Path(os.environ.get("CERTS", "/certs"))
    by_origin: dict[tuple[str, int], list[str]] = {}
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            log(f"bad URL {url}")
            return 1
        by_origin.setdefault((parts.hostname, parts.port or 443), []).append(url)

    for (host, port), group in by_origin.items():
        cfg = configuration(is_client=True)
        cfg.load_verify_locations(cafile=str(certs / "ca.pem"))
        async with connect(host, port, configuration=cfg, create_protocol=H3Client) as client:
            client: H3Client
            apply_socket_buffers(client._transport)
            dls = []
            for url in group:
                name = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1] or "index.html"
                dls.append(client.get(url, downloads / name))
            results = await asyncio.gather(*(d.done for d in dls), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            for err in errors:
                log(str(err))
            if errors:
                return 1
            for d in dls:
                log(f"{d.url}: {d.received} bytes -> {d.target}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except Exception as exc:  # noqa: BLE001 (report any failure as exit 1)
        log(f"error: {exc!r}")
        sys.exit(1)
