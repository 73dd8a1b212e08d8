"""The spec's wait caps, crossed for real (not with a lowered constant): a `bg wait` returns after
60 s and a chord `job_output` exit wait after 30 s, each reporting a running job, not an error.
The two run at once, so the suite pays about 60 s for both."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from zuno import Runtime, limits

from jobhelp import call, start_job


async def _timed(coro) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    res = await coro
    return time.monotonic() - t0, res


async def test_bg_wait_60s_and_job_output_30s_caps(tmp_path: Path) -> None:
    assert (limits.BG_WAIT_MAX_S, limits.JOB_OUTPUT_WAIT_MAX_S) == (60.0, 30.0)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    async with Runtime(root=a) as rz, rz.session() as sz, Runtime(root=b, profile="chord") as rc, rc.session() as sc:
        jz = await start_job(sz, "echo z; sleep 120")
        jc = await start_job(sc, "echo c; sleep 120")
        (tz, rz_res), (tc, rc_res) = await asyncio.gather(
            _timed(sz.step([call("bg", action="wait", taskID=jz.id, timeout_ms=600_000)])),
            _timed(sc.step([call("job_output", job_id=jc.id, wait="exit")])),
        )
        bgw = rz_res.results[0]  # type: ignore[attr-defined]
        jo = rc_res.results[0]  # type: ignore[attr-defined]
        assert bgw.outcome == "ok" and bgw.metadata["status"] == "running" and "timed out" in bgw.text
        assert jo.outcome == "ok" and "[notice] the exit wait timed out" in jo.text and "[status: running" in jo.text
        # Each wait lasted its cap: not cut short, and not the 600 s asked for (generous upper bound).
        assert 59.0 <= tz < 90.0
        assert 29.0 <= tc < 60.0
        assert jz.active and jc.active
