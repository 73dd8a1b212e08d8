"""The collector around `zuno run`'s start-up (zuno.startup_gc): paused while the agent is built,
what was built frozen once it is, collection back on afterwards, on the unhappy paths too."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from zuno.startup_gc import StartupCollection

from conftest import zuno_env

HERE = Path(__file__).resolve().parent

# Runs `zuno run` through the CLI's main in this very process, and watches the collector: a
# collection that runs once the provider's SDK has begun loading but before anything was frozen
# is one the start-up should not have paid for.
PROBE = """
import gc, json, sys
sys.path.insert(0, sys.argv[1])
from fake_provider import FakeProvider, Reply
import zuno.cli

seen = {"during_startup": 0, "after": 0}

def watch(phase, info):
    if phase != "start":
        return
    if gc.get_freeze_count() == 0:
        if "anthropic" in sys.modules:
            seen["during_startup"] += 1
    else:
        seen["after"] += 1

with FakeProvider() as fake:
    fake.script(Reply(text=["done"]))
    cfg = {"provider": {"fa": {"api": "anthropic", "options": {"baseURL": fake.root_url, "apiKey": "k"},
                               "models": {"m1": {"context": 65536, "output": 1024}}}}}
    open("zuno.json", "w").write(json.dumps(cfg))
    gc.callbacks.append(watch)
    code = zuno.cli.main(sys.argv[2:])
    gc.callbacks.remove(watch)
print(json.dumps({"code": code, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count(), **seen}))
"""


def _probe(workspace: Path, *argv: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(HERE), *argv],
        cwd=workspace,
        env=zuno_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_run_builds_the_agent_without_collecting_then_freezes_it(workspace: Path) -> None:
    got = _probe(workspace, "run", "--json", "--model", "fa/m1", "hi")
    assert got["code"] == 0
    # Loading the anthropic SDK alone runs hundreds of collections (full ones among them) unpaused.
    assert got["during_startup"] == 0, got
    assert got["enabled"] is True
    assert isinstance(got["frozen"], int) and got["frozen"] > 10_000  # the SDK's objects, among others


def test_a_run_that_cannot_start_still_turns_collection_back_on(workspace: Path) -> None:
    got = _probe(workspace, "run", "--json", "hi")  # no model configured: a usage error
    assert got["code"] == 2
    assert got["enabled"] is True
    got = _probe(workspace, "run", "--json", "--model", "nobody/m1", "hi")  # an unknown provider
    assert got["code"] == 2
    assert got["enabled"] is True


def test_pause_and_settle_are_idempotent_and_keep_a_disabled_collector_disabled() -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    s = StartupCollection()
    s.settle()  # never paused: nothing to do, nothing frozen
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    try:
        s.pause()
        s.pause()
        assert not gc.isenabled()
        kept = [[i] for i in range(100)]  # built while paused
        s.settle()
        assert gc.isenabled() and gc.get_freeze_count() >= frozen + len(kept)
        s.settle()
        assert gc.isenabled()
        gc.disable()  # a host that runs without the collector keeps running without it
        s.pause()
        s.settle()
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()  # the test process's own objects back to collectable
