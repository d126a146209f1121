"""The container image and `docker compose up`, measured without a container daemon.

deploy/Dockerfile's build stage runs here step by step as processes (its ARG, ENV, WORKDIR and COPY honoured, its
`RUN` lines run by `sh`, every absolute path of its own under a scratch folder), which builds exactly the virtual
environment and the ONNX graphs its final stage copies; their installed size is the image's, less the Python base
image. Then the steps `docker compose up` takes before the API answers, as processes, each timed: a fresh
PostgreSQL data directory initialised and started, `wovepaper migrate`, `wovepaper check` (the init container's),
and `wovepaper serve` (the image's command, two workers) until `/readyz` answers 200; the served API is asked one
query, and the workers' memory is read once ready and again after the embedding model has loaded.

    .venv/bin/python bench/image.py [--runs 3] [--python python3.11] [--build-arg TORCH_INDEX_URL=...]

Where PyTorch's CPU index cannot be reached, `--build-arg TORCH_INDEX_URL=https://pypi.org/simple` leaves the CPU
build to whatever pip finds for `torch==2.13.0` besides it. Prints one JSON object; bench/RESULTS.md keeps the
numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
IGNORE = ROOT / "deploy" / "Dockerfile.dockerignore"
# The image's own absolute paths: moved under the scratch folder.
IMAGE_PREFIXES = ("/opt/wovepaper", "/src", "/run/wovepaper")


# --- the Dockerfile, read -----------------------------------------------------------------------------------------


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments and parser directives dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        keyword, _, rest = whole.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def env_pairs(arguments: str) -> list[tuple[str, str]]:
    return [tuple(item.split("=", 1)) for item in shlex.split(arguments)]  # type: ignore[misc]


def moved(value: str, scratch: Path) -> str:
    """The image's absolute paths in a value (PATH lists too) moved under the scratch folder."""
    parts = []
    for part in value.split(":"):
        if part.startswith(IMAGE_PREFIXES):
            part = str(scratch) + part
        parts.append(part)
    return ":".join(parts)


def _pattern(glob: str) -> re.Pattern[str]:
    """Docker's ignore pattern as a regex: `*` within one path segment, `**` across them, anchored at the root."""
    out = ""
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif glob.startswith("**", i):
            out, i = out + ".*", i + 2
        elif glob[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif glob[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(glob[i]), i + 1
    return re.compile(out)


def ignored(relative: str, patterns: list[str]) -> bool:
    """Docker's rules: a pattern matches a path or any folder it is in; the last pattern that matches wins, and
    one starting with `!` keeps what it matches."""
    parts = relative.split("/")
    verdict = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        regex = _pattern(pattern.lstrip("!").rstrip("/"))
        if any(regex.fullmatch("/".join(parts[: i + 1])) for i in range(len(parts))):
            verdict = not keep
    return verdict


def copy_context(target: Path) -> int:
    patterns = [line.strip() for line in IGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")]
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    )
    copied = 0
    for relative in filter(None, tracked):
        if ignored(relative, patterns) or not (ROOT / relative).is_file():
            continue
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, target / relative)
        copied += 1
    return copied


# --- the build ----------------------------------------------------------------------------------------------------


def build(scratch: Path, python: str, build_args: dict[str, str]) -> dict[str, Any]:
    """The Dockerfile's `build` stage, run here; returns the final stage's copies and the steps' times."""
    shims = scratch / "shims"
    shims.mkdir(parents=True)
    for name in ("python", "python3"):
        (shims / name).symlink_to(shutil.which(python) or python)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")}
    base_env.pop("VIRTUAL_ENV", None)
    base_env["PATH"] = f"{shims}:{base_env.get('PATH', '')}"
    args: dict[str, str] = {}
    env: dict[str, str] = {}
    build_env: dict[str, str] = {}
    stage: str | None = None
    workdir = scratch
    steps: list[dict[str, Any]] = []
    copies: list[str] = []
    for keyword, rest in instructions(DOCKERFILE.read_text()):
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name] = build_args.get(name, default)
        elif keyword == "FROM":
            if stage == "build":
                build_env = env
            stage = rest.split(" AS ")[1].strip() if " AS " in rest else "final"
            env = {}
        elif stage == "final":
            if keyword == "COPY" and rest.startswith("--from=build"):
                copies.append(moved(rest.split()[1], scratch))
            continue
        elif keyword == "ENV":
            for name, value in env_pairs(rest):
                env[name] = moved(expand(value, {**args, **env}), scratch)
        elif keyword == "WORKDIR":
            workdir = Path(moved(rest, scratch))
            workdir.mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            started = time.perf_counter()
            files = copy_context(workdir)
            steps.append({"step": f"COPY {rest}", "files": files, "seconds": round(time.perf_counter() - started, 1)})
        elif keyword == "RUN":
            command = re.sub(r"^(--mount=\S+\s+)+", "", rest)
            started = time.perf_counter()
            result = subprocess.run(
                ["sh", "-c", f"set -e; {command}"],
                cwd=workdir,
                env={**base_env, **args, **env},
                capture_output=True,
                text=True,
            )
            seconds = round(time.perf_counter() - started, 1)
            if result.returncode != 0:
                sys.exit(f"RUN failed ({result.returncode}) after {seconds} s: {command}\n{result.stderr[-3000:]}")
            steps.append({"step": f"RUN {command[:90]}...", "seconds": seconds})
    return {"steps": steps, "copies": copies, "env": build_env}


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def largest(site_packages: Path, count: int = 10) -> list[tuple[str, float]]:
    sizes = [(p.name, tree_bytes(p) if p.is_dir() else p.stat().st_size) for p in site_packages.iterdir()]
    return [(name, round(size / 2**20, 1)) for name, size in sorted(sizes, key=lambda s: -s[1])[:count]]


# --- `docker compose up`, as processes ----------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (the workers), in MB."""
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except (OSError, AttributeError):
            continue
        pids += [int(c) for c in children]
    return round(total / 1024, 1)


def wait_ready(url: str, proc: subprocess.Popen[bytes], limit_s: float = 120) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return time.perf_counter() - started
        except OSError:
            pass
        time.sleep(0.02)
    raise RuntimeError("not ready in time")


def up_once(scratch: Path, venv: Path, models: Path, run: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    import localservers
    from localservers.postgres import start_local_postgres

    bin_dir = venv / "bin"
    elsewhere = scratch / f"cwd-{run}"  # nothing of the source tree on the path: only what the image has
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_") and k != "REDIS_URL"}
    env |= {
        "PATH": f"{bin_dir}:{env['PATH']}",
        "WOVEPAPER_MODEL_DIR": str(models),
        "PROMETHEUS_MULTIPROC_DIR": str(scratch / f"metrics-{run}"),
        "WOVEPAPER_WORKERS": "2",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    times: dict[str, Any] = {}
    started = time.perf_counter()
    pg = start_local_postgres(scratch / f"pg-{run}", durable=True)
    times["postgres_s"] = round(time.perf_counter() - started, 2)
    env["DATABASE_URL"] = pg.uri
    try:
        step = time.perf_counter()
        subprocess.run([bin_dir / "wovepaper", "migrate"], cwd=elsewhere, env=env, check=True, capture_output=True)
        times["migrate_s"] = round(time.perf_counter() - step, 2)
        step = time.perf_counter()
        check = subprocess.run(
            [bin_dir / "wovepaper", "check", "--only", "database", "--only", "migrations", "--only", "semantic"],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
        )
        times["check_s"] = round(time.perf_counter() - step, 2)
        times["check_exit"] = check.returncode
        times["check_output"] = check.stdout.strip().splitlines()
        port = localservers.free_port()
        step = time.perf_counter()
        serve = subprocess.Popen(
            [bin_dir / "wovepaper", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=elsewhere,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            times["serve_to_ready_s"] = round(wait_ready(f"http://127.0.0.1:{port}/readyz", serve), 2)
            times["up_to_ready_s"] = round(time.perf_counter() - started, 2)
            times["rss_ready_mb"] = rss_mb(serve.pid)
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/graphql",
                data=b'{"query": "{ __typename }"}',
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                times["query"] = json.loads(response.read())
            time.sleep(10)  # the embedding model loads in the background after start
            times["rss_after_model_mb"] = rss_mb(serve.pid)
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(60)
    finally:
        pg.stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--python", default="python3.11", help="The interpreter the image's base would give.")
    parser.add_argument("--build-arg", action="append", default=[], help="NAME=VALUE, as docker build takes it.")
    parser.add_argument("--workdir", type=Path, default=None, help="Scratch folder (default: a temporary one).")
    parser.add_argument("--keep", action="store_true", help="Keep the scratch folder.")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="Measure what an earlier run built in --workdir (kept) instead of building.",
    )
    options = parser.parse_args()
    scratch = options.workdir or Path(tempfile.mkdtemp(prefix="wovepaper-image-"))
    scratch.mkdir(parents=True, exist_ok=True)
    os.chmod(scratch, 0o755)  # the embedded PostgreSQL runs as another user, and must reach its data directory
    try:
        started = time.perf_counter()
        record = scratch / "build.json"
        if options.reuse and record.exists():
            built = json.loads(record.read_text())
        else:
            built = build(scratch, options.python, dict(arg.split("=", 1) for arg in options.build_arg))
            built["build_s"] = round(time.perf_counter() - started, 1)
            record.write_text(json.dumps(built))
        build_s = built["build_s"]
        venv, models = (Path(path) for path in built["copies"])
        site = next((venv / "lib").glob("python3*/site-packages"))
        export_venv = Path(built["env"]["EXPORT_VENV"])
        torch_absent = subprocess.run(
            [venv / "bin" / "python", "-c", "import importlib.util as u; print(u.find_spec('torch') is None)"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        result: dict[str, Any] = {
            "python": subprocess.run([options.python, "--version"], capture_output=True, text=True).stdout.strip(),
            "build_s": build_s,
            "steps": built["steps"],
            "image_copies_mb": {
                "venv": round(tree_bytes(venv) / 2**20, 1),
                "models": round(tree_bytes(models) / 2**20, 1),
            },
            "largest_in_venv_mb": largest(site),
            "export_venv_mb_not_in_image": round(tree_bytes(export_venv) / 2**20, 1),
            "torch_absent_from_image": torch_absent == "True",
        }
        result["image_copies_mb"]["total"] = round(sum(result["image_copies_mb"].values()), 1)
        for stale in scratch.glob("cwd-*"):
            shutil.rmtree(stale)
        for stale in [*scratch.glob("pg-*"), *scratch.glob("metrics-*")]:
            shutil.rmtree(stale, ignore_errors=True)
        runs = [up_once(scratch, venv, models, run) for run in range(options.runs)]
        result["up"] = runs
        for key in (
            "postgres_s",
            "migrate_s",
            "check_s",
            "serve_to_ready_s",
            "up_to_ready_s",
            "rss_ready_mb",
            "rss_after_model_mb",
        ):
            result[f"median_{key}"] = statistics.median(r[key] for r in runs)
        print(json.dumps(result, indent=2))
    finally:
        if not options.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
