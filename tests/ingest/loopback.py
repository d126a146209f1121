"""The fake upstreams served over real HTTP on loopback, for tests that run the `wovepaper ingest` process.

One server answers every source under its own prefix: `/oai` is arXiv, `/s2` Semantic Scholar, `/oa` OpenAlex.
Each request is handed to the fakes of `conftest.py` / `upstreams.py` as the httpx request they expect
(their recorded host names, the real path, query, headers and body), and their answer is sent back as is.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from tests.ingest.conftest import FakeOAI
from tests.ingest.upstreams import FakeScholarly


@dataclass
class Loopback:
    base: str
    oai: FakeOAI
    scholarly: FakeScholarly
    # Called with each request's path before it is answered (a kill drill counts requests with it).
    on_request: Callable[[str], None] | None = None
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def env(self, dsn: str) -> dict[str, str]:
        """The environment `wovepaper ingest` needs to use these upstreams and this database, unpaced."""
        return {
            "DATABASE_URL": dsn,
            "WOVEPAPER_ARXIV_OAI_URL": f"{self.base}/oai",
            "WOVEPAPER_ARXIV_DELAY_S": "0",
            "WOVEPAPER_S2_API_URL": f"{self.base}/s2",
            "WOVEPAPER_S2_RPS": "1000000",
            "WOVEPAPER_OPENALEX_API_URL": f"{self.base}/oa",
            "WOVEPAPER_OPENALEX_RPS": "1000000",
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        # A client killed mid-request (the kill drill does that) is no error of the server's.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


# (method, path with query, headers, body) -> (status, headers, body)
Answer = Callable[[str, str, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]


@contextmanager
def http_server(answer: Answer, host: str = "127.0.0.1") -> Iterator[int]:
    """An HTTP/1.1 server on a free port of `host` (yielded) that answers every GET and POST with `answer`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without this, Nagle's algorithm holds the body back until the
        # client's delayed ACK (40 ms a request).
        disable_nagle_algorithm = True

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, headers, content = answer(self.command, self.path, dict(self.headers), body)
            self.send_response(status)
            for k, v in headers.items():
                if k.lower() not in ("content-length", "transfer-encoding", "content-encoding"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = _Server((host, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def serve(oai: FakeOAI, scholarly: FakeScholarly) -> Iterator[Loopback]:
    box: list[Loopback] = []

    def answer(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        loop = box[0]
        with loop.lock:
            loop.requests += 1
        if loop.on_request is not None:
            loop.on_request(path)
        fake: Callable[[httpx.Request], httpx.Response]
        if path.startswith("/oai"):
            url, fake = "https://oaipmh.arxiv.org" + path, loop.oai
        elif path.startswith("/s2"):
            url, fake = "https://s2.test/graph/v1" + path.removeprefix("/s2"), loop.scholarly
        else:
            url, fake = "https://api.openalex.test" + path.removeprefix("/oa"), loop.scholarly
        with loop.lock:  # the fakes count their requests: one at a time
            resp = fake(httpx.Request(method, url, content=body, headers=headers))
        return resp.status_code, dict(resp.headers), resp.read()

    with http_server(answer) as port:
        box.append(Loopback(f"http://127.0.0.1:{port}", oai, scholarly))
        yield box[0]
