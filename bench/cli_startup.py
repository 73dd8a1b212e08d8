"""CPU time of `zuno` start-ups, A/B between source trees, interleaved.

    python bench/cli_startup.py [--rounds 5] SRC_DIR [SRC_DIR ...]

Each SRC_DIR is a `src/` directory (this checkout's, or another commit's from `git archive`); each
round runs every command against every tree in turn (PYTHONPATH=SRC_DIR) in a scratch workspace and
reads the child's user+sys CPU time (steadier than wall time on a shared machine). Prints best /
median per command and tree, and each tree's median over the first one's.

The `run` commands are one-shot `zuno run --json` turns against the loopback fake provider of the
tests (one text answer each), through the anthropic and the openai SDK: their start-up is mostly
the SDK's import. The store commands (``sessions``, ``receipt``, ``memory``, ``plan``,
``sessions prune --dry-run``) read the store the ``call`` / ``batch`` commands before them made.

Set no ``PYTHONDONTWRITEBYTECODE`` (or run ``python -m compileall -q SRC_DIR`` on every tree first):
a tree without bytecode recompiles every module at every start.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

COMMANDS = {
    "--version": ["--version"],
    "call read": ["call", "read", '{"path": "a.txt"}'],
    "batch -": ["batch", "-"],
    "tools": ["tools"],
    "sessions": ["sessions"],
    "receipt": ["receipt", "rcp_none"],
    "memory": ["memory"],
    "plan": ["plan"],
    "prune --dry-run": ["sessions", "prune", "--keep", "5", "--dry-run"],
    "run anthropic": ["run", "--json", "--model", "fa/m1", "hi"],
    "run openai": ["run", "--json", "--model", "fo/m1", "hi"],
}
STEP = b'[{"name": "read", "arguments": {"path": "a.txt"}}]'


def cpu_of(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, input=STEP, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("trees", nargs="+", type=Path)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from fake_provider import FakeProvider, Reply

    runs = sum(1 for c in COMMANDS.values() if c[0] == "run") * args.rounds * len(args.trees)
    with tempfile.TemporaryDirectory() as tmp, FakeProvider() as fake:
        fake.script(*[Reply(text=["done"]) for _ in range(runs)])
        ws = Path(tmp)
        (ws / "a.txt").write_text("hi\n")
        models = {"m1": {"context": 65536, "output": 1024}}
        (ws / "zuno.json").write_text(
            json.dumps(
                {
                    "provider": {
                        "fa": {
                            "api": "anthropic",
                            "options": {"baseURL": fake.root_url, "apiKey": "k"},
                            "models": models,
                        },
                        "fo": {
                            "api": "openai-chat",
                            "options": {"baseURL": fake.base_url, "apiKey": "k"},
                            "models": models,
                        },
                    }
                }
            )
        )
        base = {k: v for k, v in os.environ.items() if not k.startswith("ZUNO")}
        base["ZUNO_CONFIG_DIR"] = str(ws / "no-user-config")
        got: dict[tuple[str, Path], list[float]] = {(c, t): [] for c in COMMANDS for t in args.trees}
        for _ in range(args.rounds):
            for name, cmd in COMMANDS.items():
                for tree in args.trees:
                    env = dict(base, PYTHONPATH=str(tree.resolve()))
                    got[name, tree].append(cpu_of([sys.executable, "-m", "zuno", *cmd], env, ws))
        assert fake.pending == 0, f"{fake.pending} scripted answers were not asked for: a run failed"
    print(f"{args.rounds} interleaved rounds; CPU seconds (user+sys) of the child, best / median")
    first = args.trees[0]
    for name in COMMANDS:
        cells = [f"{name:<16}"]
        for tree in args.trees:
            v = got[name, tree]
            ratio = statistics.median(v) / statistics.median(got[name, first])
            cells.append(f"{tree}: {min(v):.3f} / {statistics.median(v):.3f} ({ratio:.2f}x)")
        print("  ".join(cells))


if __name__ == "__main__":
    main()
