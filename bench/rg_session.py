"""What starting rg in a session of its own costs rg, against rg started in this process's session:
the same argv, read through a pipe, started three ways, interleaved run by run:

  * plain: no new group, no new session (how the other benches start raw rg);
  * pgrp: a process group of its own (``process_group=0``), how Zuno starts rg now;
  * session: a session of its own (``start_new_session=True``), how Zuno started rg before.

Where the kernel groups tasks by session for scheduling (autogroup:
/proc/sys/kernel/sched_autogroup_enabled), a new session is a new scheduling group. Prints the best
and median wall time and rg's CPU (user + system, from the children's rusage) of each, and each
one's ratio to plain.

    python bench/rg_session.py [--runs 21] [TREE ...]

TREE defaults to the generated 100k-file tree and the Django tree of ``bench/search_vs_rg.py``
(run that once to build and fetch them).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from zuno.tools.search.rg_discovery import Rg, discover, rg_env

VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "pgrp": {"process_group": 0},
    "session": {"start_new_session": True},
}
CASES = (
    ("rg --files --hidden", ["--files", "--hidden"]),
    ("rg --files --hidden -g '*.py'", ["--files", "--hidden", "--glob", "*.py"]),
)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_once(argv: list[str], cwd: Path, env: dict[str, str], how: dict[str, Any]) -> tuple[float, float]:
    """Wall time and rg's CPU of one run, its output read through a pipe."""
    c0 = children_cpu()
    t0 = time.perf_counter()
    p = subprocess.Popen(
        argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, **how
    )
    assert p.stdout is not None
    while p.stdout.read(1 << 20):
        pass
    p.wait()
    return time.perf_counter() - t0, children_cpu() - c0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("trees", nargs="*", type=Path)
    a = ap.parse_args()
    trees = a.trees or [Path("/tmp/zuno-bench-tree-100000"), Path("/tmp/zuno-bench-src/Django-5.1.4")]
    rg = discover(None)
    if not isinstance(rg, Rg):
        raise SystemExit("no rg 14+ found (install the test extras)")
    try:
        autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip()
    except OSError:
        autogroup = "absent"
    print(f"rg {rg.path}; autogroup scheduling: {autogroup}; {a.runs} interleaved runs per variant")
    env = rg_env()
    for tree in trees:
        if not tree.is_dir():
            print(f"  {tree}: missing (run bench/search_vs_rg.py once to make it)")
            continue
        for label, args in CASES:
            argv = [rg.path, "--no-config", "--null", *args]
            results: dict[str, list[tuple[float, float]]] = {k: [] for k in VARIANTS}
            run_once(argv, tree, env, {})  # warm
            for i in range(a.runs):
                order = list(VARIANTS) if i % 2 == 0 else list(VARIANTS)[::-1]
                for name in order:
                    results[name].append(run_once(argv, tree, env, VARIANTS[name]))
            base_w = statistics.median(w for w, _ in results["plain"])
            base_c = statistics.median(c for _, c in results["plain"])
            print(f"  {tree.name}: {label}")
            for name, rows in results.items():
                w = [x for x, _ in rows]
                wm, cm = statistics.median(w), statistics.median(c for _, c in rows)
                print(
                    f"    {name:<8} wall best {min(w) * 1000:6.1f} ms, median {wm * 1000:6.1f} ms "
                    f"({wm / base_w:4.2f}x plain) | rg CPU median {cm * 1000:6.1f} ms ({cm / base_c:4.2f}x plain)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
