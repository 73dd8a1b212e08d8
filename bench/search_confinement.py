"""What rg's confinement (``tools/search/confine.py``) costs rg itself, for each way this machine
has: a view of its own (a mount namespace, ``mountview.py``) and a Landlock domain. The same rg
argv, plain and started from each confined spawner thread, interleaved; best and median of each,
and their ratio to plain rg (Landlock: the kernel checks every open rg makes against the domain;
the view: nothing is checked per open).

    python bench/search_confinement.py [--runs 30] [TREE ...]

TREE defaults to the Django source tree and the 20-file tree of ``bench/search_vs_rg.py`` (run
that once to fetch and build them).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from zuno.tools.search.confine import KINDS, Confinement
from zuno.tools.search.rg_discovery import Rg, discover

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_vs_rg import time_raw, time_raw_confined

CASES = (
    ("rg --files --hidden", ["--files", "--hidden"]),
    ("rg 'class QuerySet\\b'", ["--hidden", r"class QuerySet\b"]),
)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("trees", nargs="*", type=Path)
    a = ap.parse_args()
    rg = discover(None)
    assert isinstance(rg, Rg), rg
    trees = a.trees or [p for p in Path("/tmp/zuno-bench-src").glob("Django-*")] + [Path("/tmp/zuno-bench-tiny")]
    for tree in trees:
        root = tree.resolve()
        made = {k: Confinement([root], rg.path, kinds=(k,)) for k in KINDS}
        kinds = {k: c for k, c in made.items() if c.confined}
        for k, c in made.items():
            if not c.confined:
                print(f"{root.name}: {k} not available here ({c.problem})")
        for label, args in CASES:
            argv = [rg.path, "--no-config", *args]
            plain: list[float] = []
            conf: dict[str, list[float]] = {k: [] for k in kinds}
            for _ in range(a.runs):
                plain.append(time_raw(argv, str(root)))
                for k, c in kinds.items():
                    conf[k].append(await time_raw_confined(c, argv, str(root)))
            pb, pm = min(plain), statistics.median(plain)
            line = f"{root.name:<16} {label:<24} plain {pb * 1000:7.1f} / {pm * 1000:7.1f} ms"
            for k, ts in conf.items():
                cb, cm = min(ts), statistics.median(ts)
                line += f" | {k} {cb * 1000:7.1f} / {cm * 1000:7.1f} ms = {cb / pb:.2f}x best, {cm / pm:.2f}x median"
            print(line, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
