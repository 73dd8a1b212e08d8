"""The SDK warm-up builds real stream events of every API (so the first chunk of a fresh process
does not pay the SDK's type caches between the server's first byte and the screen)."""

from __future__ import annotations

import pytest

from zuno.agent.providers import warm as warm_mod


@pytest.mark.parametrize("api", sorted(warm_mod.WARMED_APIS))
def test_the_samples_build_the_sdks_own_event_types(api: str) -> None:
    construct, values, type_ = warm_mod._samples(api)
    built = [construct(type_=type_, value=v) for v in values]
    assert len(built) >= 2
    assert all(type(b).__module__.split(".")[0] in ("openai", "anthropic") for b in built)
    assert built[-1].delta is not None and type(built[-1]).__name__ != "dict"
    warm_mod.warm(api)
    assert api in warm_mod._done
