"""Time to the prompt of an interactive `zuno run`, against the floor of `zuno --version`.

    python bench/run_prompt.py [--rounds 5] [SRC_DIR ...]

For each SRC_DIR (default: this checkout's `src/`; pass another commit's `git archive` to compare),
interleaved round by round, on a pseudo-terminal in a scratch workspace configured for the tests'
loopback fake provider:
  * prompt: wall time from spawning `zuno run` until "zuno> " is on the terminal;
  * answer: the same session with a line typed at once — until the answer of its first turn is on
    the terminal (that turn needs the SDK, so it pays whatever loading the prompt did not wait for);
  * floor: wall time of `zuno --version` of the same tree (the interpreter's and Zuno's own start:
    no prompt can come sooner).
Prints best / median of each, per API (anthropic and openai SDKs), and prompt / floor.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def on_pty(argv: list[str], env: dict[str, str], cwd: Path, marker: bytes, typed: bytes | None) -> float:
    """Seconds from spawn until ``marker`` is on the terminal (``typed`` is written at once)."""
    master, slave = pty.openpty()
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, start_new_session=True)
    os.close(slave)
    if typed:
        os.write(master, typed)
    seen = b""
    try:
        while marker not in seen:
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                raise SystemExit(f"no {marker!r} within 60 s: {seen[-400:]!r}")
            seen += os.read(master, 65536)
        return time.perf_counter() - t0
    finally:
        child.kill()
        child.wait()
        os.close(master)


def wall_of(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=env, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("trees", nargs="*", type=Path)
    args = ap.parse_args()
    trees = args.trees or [HERE / "src"]
    sys.path.insert(0, str(HERE / "tests"))
    from fake_provider import FakeProvider, Reply

    apis = {"anthropic": "fa/m1", "openai": "fo/m1"}
    with tempfile.TemporaryDirectory() as tmp, FakeProvider() as fake:
        fake.script(*[Reply(text=["the answer\n"]) for _ in range(args.rounds * len(trees) * len(apis))])
        ws = Path(tmp)
        models = {"m1": {"context": 65536, "output": 1024}}
        (ws / "zuno.json").write_text(
            json.dumps(
                {
                    "provider": {
                        "fa": {"api": "anthropic", "options": {"baseURL": fake.root_url, "apiKey": "k"},
                               "models": models},
                        "fo": {"api": "openai-chat", "options": {"baseURL": fake.base_url, "apiKey": "k"},
                               "models": models},
                    }
                }
            )
        )
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for tree in trees:
                env = {**os.environ, "PYTHONPATH": str(tree), "ZUNO_CONFIG_DIR": str(ws / "cfg"), "TERM": "dumb"}
                base = [sys.executable, "-m", "zuno"]
                times.setdefault((str(tree), "floor"), []).append(wall_of([*base, "--version"], env, ws))
                for api, model in apis.items():
                    run = [*base, "run", "--model", model]
                    times.setdefault((str(tree), f"{api} prompt"), []).append(on_pty(run, env, ws, b"zuno> ", None))
                    times.setdefault((str(tree), f"{api} answer"), []).append(
                        on_pty(run, env, ws, b"the answer", b"a question\n")
                    )
    for tree in trees:
        floor = times[(str(tree), "floor")]
        print(f"{tree}  (best / median, s; {args.rounds} rounds)")
        print(f"  zuno --version (floor)   {min(floor):6.3f} / {statistics.median(floor):6.3f}")
        for api in apis:
            p, a = times[(str(tree), f"{api} prompt")], times[(str(tree), f"{api} answer")]
            print(
                f"  {api:<9} prompt {min(p):6.3f} / {statistics.median(p):6.3f}"
                f"  ({statistics.median(p) / statistics.median(floor):4.2f}x the floor, median)"
                f"   first answer {min(a):6.3f} / {statistics.median(a):6.3f}"
            )


if __name__ == "__main__":
    main()
