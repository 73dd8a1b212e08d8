"""Benchmark: 32 parallel fetches of a 200 KiB page from a loopback HTTPS server.

Zuno's fetch (URL parser, resolution of ``localhost``, the address table with
``allow_private``, a pinned pool per call, the body cap, charset decoding) against plain httpx
with no validation (one shared client), in the same run; then both through the same loopback
SOCKS5 proxy. Target: Zuno ≤ 1.3× httpx. Also reported: the whole tool through
``Session.step`` (dispatcher, SQLite, the output limits withholding a 200 KiB body), which
has no httpx counterpart.

    python bench/web_fetch.py [--rounds 5] [--n 32]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import httpx  # noqa: E402

import zuno  # noqa: E402
from zuno.tools.web.content import ContentType, decode  # noqa: E402
from zuno.tools.web.engine import Fetcher  # noqa: E402

from webhelp import CA, Origin, ProxyServer, response  # noqa: E402

PAGE = (b"Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n" * 3600)[: 200 * 1024]


async def with_httpx(url: str, n: int, ca: CA, proxy: str | None) -> float:
    async with httpx.AsyncClient(verify=ca.client_context(), proxy=proxy, trust_env=False) as client:
        t = time.perf_counter()
        rs = await asyncio.gather(*(client.get(url) for _ in range(n)))
        assert all(r.status_code == 200 and len(r.content) == len(PAGE) for r in rs)
        [r.text for r in rs]
        return time.perf_counter() - t


async def with_zuno(url: str, n: int, ca: CA, proxy: str | None) -> float:
    env = {"https_proxy": proxy} if proxy else {}
    f = Fetcher(environ=env, ssl_context=ca.client_context())

    async def one() -> None:
        got = await f.fetch(url, allow_private=["localhost"])
        assert len(got.body) == len(PAGE)
        decode(got.body, got.content_type or ContentType.parse(None))

    t = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - t


async def with_tool(url: str, n: int, root: Path) -> float:
    cfg = {"webfetch": {"allow_private": ["localhost"]}, "concurrency": {"tool_calls": n}}
    async with zuno.Runtime(root=root, config_overrides=cfg) as rt, rt.session() as s:
        t = time.perf_counter()
        res = await s.step([{"name": "webfetch", "arguments": {"url": url}} for _ in range(n)])
        elapsed = time.perf_counter() - t
        assert all(r.outcome == "ok" for r in res.results), res.results[0].text[:300]
        return elapsed


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=32)
    a = ap.parse_args()
    ca = CA()
    with tempfile.TemporaryDirectory() as tmp:
        pem = Path(tmp) / "ca.pem"
        ca.ca.cert_pem.write_to_path(str(pem))
        os.environ["SSL_CERT_FILE"] = str(pem)
        for k in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            os.environ.pop(k, None)
        async with Origin(ca.server_context()) as origin, ProxyServer("socks5") as socks:
            origin.routes["/page"] = response(200, PAGE, "text/plain; charset=utf-8")
            url = f"https://localhost:{origin.port}/page"
            proxy = f"socks5://127.0.0.1:{socks.port}"
            await with_httpx(url, 4, ca, None)
            await with_zuno(url, 4, ca, None)
            rows: dict[str, list[float]] = {k: [] for k in ("httpx", "zuno", "httpx+socks5", "zuno+socks5", "tool")}
            for _ in range(a.rounds):
                rows["httpx"].append(await with_httpx(url, a.n, ca, None))
                rows["zuno"].append(await with_zuno(url, a.n, ca, None))
                rows["httpx+socks5"].append(await with_httpx(url, a.n, ca, proxy))
                rows["zuno+socks5"].append(await with_zuno(url, a.n, ca, proxy))
                rows["tool"].append(await with_tool(url, a.n, Path(tmp)))
            asked = sorted({t[0] for t in socks.targets})
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"{a.n} parallel fetches of 200 KiB over loopback HTTPS, median of {a.rounds} rounds")
    for k, v in med.items():
        print(f"  {k:13s} {v * 1000:8.1f} ms")
    print(f"  direct: zuno / httpx = {med['zuno'] / med['httpx']:.2f}x (target <= 1.3x)")
    print(f"  socks5: zuno / httpx = {med['zuno+socks5'] / med['httpx+socks5']:.2f}x (target <= 1.3x)")
    print(f"  the SOCKS5 proxy was asked for: {asked} (httpx sends the name, zuno the validated IP)")
    print(f"  whole tool through Session.step / httpx = {med['tool'] / med['httpx']:.2f}x (no target)")


if __name__ == "__main__":
    asyncio.run(main())
