"""What rg's Landlock confinement (``tools/search/confine.py``) costs rg itself: the same rg argv,
plain and started from the confined spawner thread, interleaved; best and median of each, and
their ratio (the kernel checks every open rg makes against the domain).

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

from zuno.tools.search.confine import confinement_for, landlock_abi
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
    if landlock_abi() == 0:
        sys.exit("this kernel has no Landlock: rg runs unconfined, nothing to measure")
    rg = discover(None)
    assert isinstance(rg, Rg), rg
    trees = a.trees or [p for p in Path("/tmp/zuno-bench-src").glob("Django-*")] + [Path("/tmp/zuno-bench-tiny")]
    for tree in trees:
        root = tree.resolve()
        c = confinement_for([root], rg.path)
        assert c is not None and c.confined, "the domain could not be made"
        for label, args in CASES:
            argv = [rg.path, "--no-config", *args]
            plain: list[float] = []
            conf: list[float] = []
            for _ in range(a.runs):
                plain.append(time_raw(argv, str(root)))
                conf.append(await time_raw_confined(c, argv, str(root)))
            pb, pm, cb, cm = min(plain), statistics.median(plain), min(conf), statistics.median(conf)
            print(
                f"{root.name:<16} {label:<24} plain {pb * 1000:7.1f} / {pm * 1000:7.1f} ms  "
                f"confined {cb * 1000:7.1f} / {cm * 1000:7.1f} ms  ratio {cb / pb:.2f}x best, {cm / pm:.2f}x median",
                flush=True,
            )


if __name__ == "__main__":
    asyncio.run(main())
