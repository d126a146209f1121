"""The image installs the project as a wheel, not from the source tree: the wheel must carry every file the API
reads at run time (the site's operations, the migrations, the demo's words), or the API would start without them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Files the code reads beside itself (Path(__file__)...), as globs under the repository.
DATA = [
    "frontend_contract/operations/*.graphql",
    "frontend_contract/fragments/*.graphql",
    "db/migrations/*.sql",
    "demo/words.json",
]


def test_the_wheel_carries_what_the_api_reads_at_run_time(tmp_path: Path) -> None:
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for relative in filter(None, tracked.decode().split("\0")):
        if relative.startswith(("tests/", "bench/", "frontend_contract/test/")) or not (ROOT / relative).is_file():
            continue
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_bytes((ROOT / relative).read_bytes())
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w",
         str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("wovepaper_api-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for pattern in DATA:
        wanted = {str(p.relative_to(ROOT)) for p in ROOT.glob(pattern)}
        assert wanted and wanted <= names, f"{pattern}: missing {sorted(wanted - names)}"
    # app/ finds the operations beside it once installed.
    assert "app/__init__.py" in names and "cli/check.py" in names and "ingest/locks.py" in names
    # Nothing that is not the application's.
    assert not [n for n in names if n.startswith(("tests/", "bench/", "deploy/"))]
