"""Ingest benchmark: OAI-PMH harvest throughput and memory.

    .venv/bin/python -m bench.ingest_oai [--records 100000] [--page-size 2500] [--database-url DSN]

A loopback server (a separate process) serves generated ListRecords pages in the real arXivRaw
format (2025 server shape: opaque tokens, empty final token; versions, TeX, old-style ids,
withdrawn papers, `<acm-class>None`). The real harvest (`ingest.harvest.harvest_arxiv`: streaming
parse, one transaction per page with its checkpoint) loads them into a throwaway database, which is
dropped afterwards. Reports records/s and the process's resident memory after each tenth of the run.
Without --database-url (or DATABASE_URL) the project-local PostgreSQL is used.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo import words as W  # noqa: E402

FIRST_NAMES = ["Ada", "José", "Zhaoxin", "Müller", "Ricardo", "Aleksandar", "Naihong", "Jakub", "Priya", "Olga"]
LAST_NAMES = ["Lovelace", "Núñez", "Xu", 'Schr\\"oder', "Weder", "Shtedritski", "Hu", "L\\'ala", "Patel", "Ivanova"]
CATEGORIES = ["hep-th", "cs.LG", "math.AP", "astro-ph.CO", "cond-mat.str-el", "quant-ph", "cs.CL", "stat.ML"]


def record(n: int) -> str:
    rnd = random.Random(n)
    old = n % 10 == 0
    # Old-style ids number every tenth record: unique up to 9M records.
    arxiv_id = f"hep-th/{9100000 + n // 10:07d}" if old else f"{1000 + n // 99999 % 9000:04d}.{n % 99999:05d}"
    first = datetime(2007, 4, 1, tzinfo=UTC) + timedelta(minutes=n)
    nver = rnd.randint(1, 3)
    withdrawn = n % 97 == 0
    versions = "".join(
        f'<version version="v{v}"><date>{format_datetime(first + timedelta(days=30 * (v - 1)), usegmt=True)}</date>'
        f"<size>{0 if withdrawn and v == nver else rnd.randint(10, 900)}kb</size>"
        f"{'<source_type>I</source_type>' if withdrawn and v == nver else '<source_type>D</source_type>'}</version>"
        for v in range(1, nver + 1)
    )
    cats = " ".join(rnd.sample(CATEGORIES, rnd.randint(1, 3)))
    authors = [f"{rnd.choice(FIRST_NAMES)} {rnd.choice(LAST_NAMES)}" for _ in range(rnd.randint(1, 8))]
    author_text = ", ".join(authors[:-1]) + (" and " if len(authors) > 1 else "") + authors[-1]
    # Real abstracts run to about 1,100 characters of varied vocabulary (what the full-text index costs);
    # the demo's sentence bank for the paper's field gives that.
    field = W.field_of(cats.split()[0])
    abstract = W.abstract(rnd, field)
    while len(abstract) < 1000:
        abstract += " " + W.abstract(rnd, field)
    return (
        "<record><header>"
        f"<identifier>oai:arXiv.org:{arxiv_id}</identifier><datestamp>2011-02-03</datestamp>"
        "<setSpec>physics:hep-th</setSpec></header><metadata>"
        '<arXivRaw xmlns="http://arxiv.org/OAI/arXivRaw/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://arxiv.org/OAI/arXivRaw/ https://oaipmh.arxiv.org/OAI/arXivRaw.xsd">'
        f"<id>{arxiv_id}</id><submitter>{authors[0]}</submitter>{versions}"
        f'<title>{escape(W.title(rnd, field))} with $S(k,\\omega)$:\n   the G{{\\"o}}del case</title>'
        f"<authors>{author_text}</authors><categories>{cats}</categories>"
        f"<comments>{'This paper has been withdrawn' if withdrawn else '12 pages, 3 figures'}</comments>"
        "<acm-class>None</acm-class>"
        + (f"<doi>10.1103/PhysRevD.{n}</doi>" if n % 3 == 0 else "")
        + f"<abstract>  {escape(abstract)}</abstract></arXivRaw></metadata></record>"
    )


def page(index: int, size: int, total: int) -> bytes:
    start = index * size
    end = min(start + size, total)
    more = end < total
    token = (
        f"<resumptionToken expirationDate='2026-12-01T00:00:00Z'>verb%3DListRecords%26skip%3D{end}</resumptionToken>"
        if more
        else "<resumptionToken/>"
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
        "<responseDate>2026-11-30T00:47:01Z</responseDate>"
        '<request verb="ListRecords" metadataPrefix="arXivRaw">https://oaipmh.arxiv.org/oai</request><ListRecords>'
        + "".join(record(n) for n in range(start, end))
        + token
        + "</ListRecords></OAI-PMH>"
    ).encode()


def serve(port: int, size: int, total: int) -> None:
    # Generated before listening (the harvester waits for the port), so serving costs no CPU the
    # harvester and PostgreSQL need: the machine has two cores.
    pages = [page(i, size, total) for i in range((total + size - 1) // size)]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            params = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
            token = params.get("resumptionToken")
            index = int(token.rsplit("%3D", 1)[1]) // size if token else 0
            body = pages[index]
            self.send_response(200)
            self.send_header("Content-Type", "text/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """user + system CPU seconds of a process (the PostgreSQL backend is another process)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def run(admin_dsn: str, port: int, total: int, writers: int = 2) -> None:
    import asyncpg

    from db.admin import create_database
    from db.migrate import migrate
    from ingest.clients.arxiv_oai import ArxivOAIClient
    from ingest.harvest import harvest_arxiv

    name = f"wovepaper_bench_ingest_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(admin_dsn)
    await create_database(admin, name)
    head, sep, query = admin_dsn.partition("?")
    dsn = head.rsplit("/", 1)[0] + f"/{name}" + sep + query
    try:
        conn = await asyncpg.connect(dsn)
        await migrate(conn)
        client = ArxivOAIClient(f"http://127.0.0.1:{port}/oai", delay_s=0)
        samples: list[tuple[int, float]] = []
        stats_calls = 0

        class Sampler:
            """Non-TTY stream: progress lines go nowhere; memory is sampled per page instead."""

            def isatty(self) -> bool:
                return False

            def write(self, s: str) -> int:
                return len(s)

            def flush(self) -> None:
                pass

        original = client.list_records

        async def sampled(**kw: object) -> object:
            nonlocal stats_calls
            stats_calls += 1
            samples.append((stats_calls, rss_mb()))
            return await original(**kw)  # type: ignore[arg-type]

        client.list_records = sampled  # type: ignore[method-assign]
        writer = await asyncpg.connect(dsn) if writers == 2 else None
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        backend2 = await writer.fetchval("SELECT pg_backend_pid()") if writer is not None else None
        start_rss = rss_mb()
        cpu0, pg0 = time.process_time(), cpu_s(backend) + (cpu_s(backend2) if backend2 else 0)
        t0 = time.perf_counter()
        summary = await harvest_arxiv(conn, client, stream=Sampler(), writer=writer)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - t0
        cpu, pg_cpu = time.process_time() - cpu0, cpu_s(backend) + (cpu_s(backend2) if backend2 else 0) - pg0
        if writer is not None:
            await writer.close()
        load = os.getloadavg()[0]
        await client.aclose()
        rows = await conn.fetchval("SELECT count(*) FROM papers")
        authors = await conn.fetchval("SELECT count(*) FROM authorships")
        await conn.close()
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"records: {summary.seen:,} seen, {rows:,} papers and {authors:,} authorships stored,"
            f" {summary.failed} failed"
        )
        print(f"pages: {summary.requests}; time: {elapsed:.1f} s; throughput: {summary.seen / elapsed:,.0f} records/s")
        step = max(1, len(samples) // 10)
        trace = ", ".join(f"p{n}: {mb:.0f}" for n, mb in samples[::step])
        print(f"RSS MB before the run {start_rss:.0f}; at page start {trace}; peak (ru_maxrss) {peak:.0f}")
        print(f"full corpus (2.5M records) at this rate: {2_500_000 / (summary.seen / elapsed) / 60:.1f} min")
        # The harvester and the backends run in parallel (the next page parses while two are written):
        # records per CPU-second says what the work costs, whatever else the machine is running.
        print(
            f"writers: {writers}; CPU: harvester {cpu:.1f} s ({summary.seen / cpu:,.0f} records/s),"
            f" PostgreSQL backends {pg_cpu:.1f} s ({summary.seen / pg_cpu:,.0f} records/s),"
            f" together {summary.seen / (cpu + pg_cpu):,.0f} records per CPU-second;"
            f" 1-min load average at the end {load:.1f} on {os.cpu_count()} cores"
        )
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--page-size", type=int, default=2500)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--writers", type=int, choices=(1, 2), default=2, help="connections writing pages")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.page_size, args.records)
        return
    dsn = args.database_url
    if not dsn:
        import localservers

        dsn = localservers.start_postgres(ROOT / ".wovepaper" / "test")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve",
            str(port),
            "--page-size",
            str(args.page_size),
            "--records",
            str(args.records),
        ]
    )
    try:
        for _ in range(6000):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        asyncio.run(run(dsn, port, args.records, args.writers))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
