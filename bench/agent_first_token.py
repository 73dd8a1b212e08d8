"""Benchmark: time from the model server's first streamed byte to the adapter's first TextDelta
(target <= 5 ms), per wire API, against the same SDK read raw (no adapter) in the same run.

The server is the loopback fake (tests/fake_provider.py): it stamps, with perf_counter in its
own thread, the write of the first SSE byte and of the first text delta; the consumer stamps
the arrival of the first TextDelta. Same process, same clock.

    python bench/agent_first_token.py [--n 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import anthropic  # noqa: E402
import openai  # noqa: E402

from zuno.agent.providers import ProviderSettings, provider_from_settings  # noqa: E402
from zuno.agent.types import ModelRequest, RequestOutcome, TextDelta, UserMessage  # noqa: E402

from fake_provider import FakeProvider, Recorded, Reply  # noqa: E402

TARGET_MS = 5.0
APIS = ("openai-chat", "openai-responses", "anthropic")
REPLY = Reply(text=["first", " token", " and", " more"])


async def adapter_once(fake: FakeProvider, api: str, provider: object) -> tuple[float, Recorded]:
    req = ModelRequest("m", "sys", (UserMessage("hi"),))
    fake.script(REPLY)
    first = None
    async for ev in provider.stream(req, RequestOutcome()):  # type: ignore[attr-defined]
        if first is None and isinstance(ev, TextDelta):
            first = time.perf_counter()
    assert first is not None
    return first, fake.requests[-1]


async def raw_once(fake: FakeProvider, api: str, client: object) -> tuple[float, Recorded]:
    fake.script(REPLY)
    first = None
    if api == "openai-chat":
        stream = await client.chat.completions.create(  # type: ignore[attr-defined]
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        async for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter()
    elif api == "openai-responses":
        stream = await client.responses.create(model="m", input="hi", stream=True)  # type: ignore[attr-defined]
        async for ev in stream:
            if first is None and ev.type == "response.output_text.delta":
                first = time.perf_counter()
    else:
        stream = await client.messages.create(  # type: ignore[attr-defined]
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}], stream=True)
        async for ev in stream:
            if first is None and ev.type == "content_block_delta":
                first = time.perf_counter()
    assert first is not None
    return first, fake.requests[-1]


def ms(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"median {statistics.median(xs) * 1000:6.2f} ms  p90 {xs[int(len(xs) * 0.9) - 1] * 1000:6.2f} ms"


async def main(n: int) -> None:
    with FakeProvider() as fake:
        print(f"first TextDelta after the server's bytes, {n} requests per API (target <= {TARGET_MS} ms)")
        for api in APIS:
            url = fake.root_url if api == "anthropic" else fake.base_url
            provider = provider_from_settings(ProviderSettings("bench", "m", api, url, api_key="k"))  # type: ignore[arg-type]
            raw = (anthropic.AsyncAnthropic(api_key="k", base_url=url, max_retries=0) if api == "anthropic"
                   else openai.AsyncOpenAI(api_key="k", base_url=url, max_retries=0))
            for _ in range(5):  # warm up: imports, connection pool
                await adapter_once(fake, api, provider)
                await raw_once(fake, api, raw)
            a_text, a_byte, r_text, server = [], [], [], []
            for _ in range(n):
                t, rec = await adapter_once(fake, api, provider)
                assert rec.first_byte_at is not None
                a_text.append(t - rec.text_written_at[0])
                a_byte.append(t - rec.first_byte_at)
                server.append(rec.text_written_at[0] - rec.first_byte_at)
                t, rec = await raw_once(fake, api, raw)
                r_text.append(t - rec.text_written_at[0])
            med_a, med_r = statistics.median(a_text), statistics.median(r_text)
            print(f"\n{api}")
            print(f"  adapter: text-delta write -> TextDelta   {ms(a_text)}")
            print(f"  adapter: first SSE byte   -> TextDelta   {ms(a_byte)}")
            print(f"  raw SDK: text-delta write -> its event   {ms(r_text)}")
            print(f"  server:  first byte -> first text write  {ms(server)}")
            verdict = "within" if statistics.median(a_byte) * 1000 <= TARGET_MS else "OVER"
            print(f"  adapter / raw SDK = {med_a / med_r:4.2f}x; first byte -> TextDelta {verdict} the "
                  f"{TARGET_MS} ms target")
            await provider.aclose()
            await raw.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    asyncio.run(main(ap.parse_args().n))
