"""A loopback HTTP server answering from a function: fake upstreams reached over real sockets."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# (method, path with its query, body) -> (status, headers, body)
Respond = Callable[[str, str, bytes], tuple[int, Iterable[tuple[str, str]], bytes]]


@contextmanager
def loopback(respond: Respond) -> Iterator[str]:
    """Serve `respond` on 127.0.0.1 (a free port) while the block runs; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, headers, content = respond(self.command, self.path, body)
            self.send_response(status)
            for k, v in headers:
                if k.lower() not in ("content-length", "transfer-encoding"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
