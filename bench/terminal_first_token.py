"""Benchmark: time from the model server's first SSE byte to the first byte of model text on the
terminal (target <= 5 ms), through the whole of ``zuno run`` on a real pseudo-terminal.

Each sample starts ``zuno run PROMPT`` with stdin, stdout and stderr on a fresh pty (so the
Markdown view, the spinner and the partial-line streaming are all live) against the loopback fake
server (tests/fake_provider.py, in this process, its own threads). The server stamps the write of
its first SSE byte and of its first text delta (perf_counter: CLOCK_MONOTONIC, the same clock in
every process); this process reads the pty master and stamps the read that brings the first byte
of the model's text. The reply's first line has no newline until its last delta, so a
line-buffered view could not show anything before the end of the stream.

    python bench/terminal_first_token.py [--n 10] [--api openai-chat]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fake_provider import FakeProvider, Reply  # noqa: E402

TARGET_MS = 5.0
MARKER = b"first"
REPLY = Reply(text=["first", " **token**", " and", " more\n"])


def configure(root: Path, fake: FakeProvider, api: str) -> None:
    url = fake.root_url if api == "anthropic" else fake.base_url
    cfg = {
        "model": "fake/m1",
        "provider": {"fake": {"api": api, "options": {"baseURL": url, "apiKey": "k"},
                              "models": {"m1": {"context": 65536, "output": 2048}}}},
    }
    (root / "zuno.json").write_text(json.dumps(cfg))


def one(root: Path, fake: FakeProvider, env: dict[str, str]) -> tuple[float, float]:
    """(first SSE byte -> first text byte on the pty, first text write -> pty), in seconds."""
    fake.script(REPLY)
    n_before = len(fake.requests)
    master, slave = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "zuno", "run", "hi", "--root", str(root)],
                             stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    seen, seen_at = b"", None
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if child.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            now = time.perf_counter()
            seen += chunk
            if seen_at is None and MARKER in seen:
                seen_at = now
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
        os.close(master)
    assert seen_at is not None, seen.decode(errors="replace")
    rec = fake.requests[n_before]
    assert rec.first_byte_at is not None and rec.text_written_at
    return seen_at - rec.first_byte_at, seen_at - rec.text_written_at[0]


def ms(xs: list[float]) -> str:
    xs = sorted(xs)
    return (f"median {statistics.median(xs) * 1000:6.2f} ms  min {xs[0] * 1000:6.2f} ms  "
            f"max {xs[-1] * 1000:6.2f} ms")


def main(n: int, api: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ZUNO") and k != "NO_COLOR"}
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory() as tmp, FakeProvider() as fake:
        root = Path(tmp) / "ws"
        root.mkdir()
        env["ZUNO_CONFIG_DIR"] = str(Path(tmp) / "cfg")
        configure(root, fake, api)
        one(root, fake, env)  # warm up: bytecode caches
        byte, text = [], []
        for _ in range(n):
            b, t = one(root, fake, env)
            byte.append(b)
            text.append(t)
        med = statistics.median(byte) * 1000
        print(f"zuno run on a pty, {api}, {n} runs (target <= {TARGET_MS} ms)")
        print(f"  server's first SSE byte   -> first text byte on the pty  {ms(byte)}")
        print(f"  server's first text write -> first text byte on the pty  {ms(text)}")
        print(f"  median / target = {med / TARGET_MS:4.2f}  ({'within' if med <= TARGET_MS else 'OVER'} the target)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--api", default="openai-chat", choices=("openai-chat", "openai-responses", "anthropic"))
    args = ap.parse_args()
    main(args.n, args.api)
