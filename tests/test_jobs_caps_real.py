"""The spec's wait caps: a `bg wait` returns after 60 s and a chord `job_output` exit wait after 30 s,
each reporting a running job, not an error.

The values are the constants (asserted here); each tool reads its constant when a call waits, so
the crossing below is real (real jobs, real waits through two sessions at once, the 600 s asked
for clamped to the cap, each wait lasting at least its cap and reporting it) with the constants
lowered to 2 s and 1 s: the suite does not sit through a minute for it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from zuno import Runtime, limits

from jobhelp import call, start_job

BG_CAP_S, JOB_OUTPUT_CAP_S = 2.0, 1.0


async def _timed(coro) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    res = await coro
    return time.monotonic() - t0, res


def test_the_caps_are_the_spec_values() -> None:
    assert (limits.BG_WAIT_MAX_S, limits.JOB_OUTPUT_WAIT_MAX_S) == (60.0, 30.0)


async def test_bg_wait_and_job_output_caps_are_crossed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BG_WAIT_MAX_S", BG_CAP_S)
    monkeypatch.setattr(limits, "JOB_OUTPUT_WAIT_MAX_S", JOB_OUTPUT_CAP_S)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    async with Runtime(root=a) as rz, rz.session() as sz, Runtime(root=b, profile="chord") as rc, rc.session() as sc:
        jz = await start_job(sz, "echo z; sleep 120")
        jc = await start_job(sc, "echo c; sleep 120")
        (tz, rz_res), (tc, rc_res) = await asyncio.gather(
            _timed(sz.step([call("bg", action="wait", taskID=jz.id, timeout_ms=600_000)])),
            _timed(sc.step([call("job_output", job_id=jc.id, wait="exit", timeout_ms=600_000)])),
        )
        bgw = rz_res.results[0]  # type: ignore[attr-defined]
        jo = rc_res.results[0]  # type: ignore[attr-defined]
        assert bgw.outcome == "ok" and bgw.metadata["status"] == "running" and "timed out" in bgw.text
        assert "capped at 2.0s" in bgw.text
        assert jo.outcome == "ok" and "[notice] the exit wait timed out" in jo.text and "[status: running" in jo.text
        # Each wait lasted its cap: not cut short, and not the 600 s asked for (generous upper bound).
        assert BG_CAP_S <= tz < 60.0
        assert JOB_OUTPUT_CAP_S <= tc < 60.0
        assert jz.active and jc.active
