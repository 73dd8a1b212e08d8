"""Zuno's own retries: transient failures retried with backoff or Retry-After, each attempt timed
on its own; permanent ones fail at once; no key in any error, record or log."""

from __future__ import annotations

import email.utils
import logging
import random
import time

import pytest

from zuno.agent.providers import MAX_ATTEMPTS, RetryPolicy, parse_retry_after
from zuno.agent.providers.retry import RETRY_AFTER_CAP_S
from zuno.agent.types import ProviderError, RequestOutcome, StreamRestarted

from fake_provider import Drop, Fail, FakeProvider, Reply
from provider_help import APIS, FAST, HEADER_SECRET, SECRET, collect, finished, make, request, texts


@pytest.fixture
def fake():
    with FakeProvider() as f:
        yield f


@pytest.mark.parametrize("api", APIS)
async def test_429_with_retry_after_is_honoured_then_succeeds(fake: FakeProvider, api: str) -> None:
    fake.script(Fail(429, retry_after="1"), Reply(text="ok"))
    p = make(fake, api)  # backoff alone would wait at most 10 ms
    outcome = RequestOutcome()
    events = await collect(p, request(), outcome)
    assert texts(events) == ["ok"]
    first, second = outcome.attempts
    assert (first.number, first.status, first.error_category, first.retry_after_s) == (1, 429, "rate_limited", 1.0)
    assert (second.number, second.status, second.error_category) == (2, 200, None)
    # Each attempt has its own times, in order, and the gap between them is the server's delay.
    assert first.started_at <= first.ended_at <= second.started_at <= second.ended_at
    gap = second.started_at - first.ended_at
    assert gap >= 0.95
    assert gap > 20 * FAST.backoff_base_s
    # the wait is between attempts, not inside them
    assert first.ended_at - first.started_at < gap
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_500_then_success(fake: FakeProvider, api: str) -> None:
    fake.script(Fail(500), Reply(text="fine"))
    p = make(fake, api)
    outcome = RequestOutcome()
    assert texts(await collect(p, request(), outcome)) == ["fine"]
    assert [(a.status, a.error_category) for a in outcome.attempts] == [(500, "server"), (200, None)]
    await p.aclose()


async def test_529_overloaded_and_a_dropped_connection_are_transient(fake: FakeProvider) -> None:
    fake.script(Fail(529), Drop(), Reply(text="up"))
    p = make(fake, "anthropic")
    outcome = RequestOutcome()
    assert texts(await collect(p, request(), outcome)) == ["up"]
    assert [a.error_category for a in outcome.attempts] == ["overloaded", "connection", None]
    assert outcome.attempts[1].status is None
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_400_is_not_retried(fake: FakeProvider, api: str) -> None:
    fake.script(Fail(400), Reply(text="never sent"))
    p = make(fake, api)
    outcome = RequestOutcome()
    with pytest.raises(ProviderError) as e:
        await collect(p, request(), outcome)
    err = e.value
    assert (err.category, err.status) == ("bad_request", 400)
    assert len(outcome.attempts) == 1 and len(err.attempts) == 1
    assert fake.pending == 1 and len(fake.requests) == 1
    msg = str(err)
    assert "provider fake" in msg and api in msg and "bad_request" in msg
    await p.aclose()


async def test_transient_failures_stop_after_the_named_maximum(fake: FakeProvider) -> None:
    fake.script(*[Fail(503) for _ in range(MAX_ATTEMPTS + 1)])
    p = make(fake, "openai-chat")
    outcome = RequestOutcome()
    with pytest.raises(ProviderError) as e:
        await collect(p, request(), outcome)
    assert len(outcome.attempts) == MAX_ATTEMPTS == len(fake.requests)
    assert e.value.category == "server" and e.value.status == 503
    assert f"after {MAX_ATTEMPTS} attempts" in str(e.value)
    await p.aclose()


async def test_backoff_grows_between_attempts(fake: FakeProvider) -> None:
    fake.script(Fail(502), Fail(502), Fail(502), Reply(text="ok"))
    p = make(fake, "openai-chat", retry=RetryPolicy(backoff_base_s=0.1, backoff_max_s=10))
    outcome = RequestOutcome()
    await collect(p, request(), outcome)
    a = outcome.attempts
    gaps = [a[i + 1].started_at - a[i].ended_at for i in range(3)]
    # base 0.1 s doubling, jitter in [0.5, 1]: at least 0.05, 0.1, 0.2
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1 and gaps[2] >= 0.2
    assert gaps[2] > gaps[0]
    await p.aclose()


def test_retry_after_forms_and_the_cap() -> None:
    now = time.time()
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= (parse_retry_after({"retry-after": date}, now=now) or 0) <= 31
    assert parse_retry_after({"retry-after": email.utils.formatdate(now - 30, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    policy = RetryPolicy()
    assert policy.delay(1, 3600.0) == RETRY_AFTER_CAP_S
    rng = random.Random(1)
    d1, d3 = policy.delay(1, None, rng), policy.delay(3, None, rng)
    assert policy.backoff_base_s * 0.5 <= d1 <= policy.backoff_base_s
    assert policy.backoff_base_s * 2 <= d3 <= policy.backoff_base_s * 4
    assert policy.delay(30, None, rng) <= policy.backoff_max_s


async def test_retry_after_as_an_http_date_is_honoured(fake: FakeProvider) -> None:
    # An HTTP-date has whole seconds: ask for "2 s from now", which is 1..2 s away.
    fake.script(Fail(503, retry_after=email.utils.formatdate(time.time() + 2, usegmt=True)), Reply(text="ok"))
    p = make(fake, "openai-responses")
    outcome = RequestOutcome()
    await collect(p, request(), outcome)
    first, second = outcome.attempts
    assert first.retry_after_s is not None and 0.5 <= first.retry_after_s <= 2.0
    assert second.started_at - first.ended_at >= first.retry_after_s * 0.9
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_no_key_in_any_error_record_or_log(fake: FakeProvider, api: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echo = f"Incorrect API key provided: {SECRET}; header {HEADER_SECRET}"
    body = ({"type": "error", "error": {"type": "authentication_error", "message": echo}} if api == "anthropic"
            else {"error": {"message": echo, "type": "invalid_request_error", "code": "invalid_api_key"}})
    fake.script(Fail(429, retry_after="0"), Fail(401, body=body))
    p = make(fake, api)
    outcome = RequestOutcome()
    with pytest.raises(ProviderError) as e:
        await collect(p, request(), outcome)
    assert e.value.category == "auth" and e.value.status == 401
    # the key was really sent, and is nowhere we keep or show
    assert SECRET in fake.requests[0].headers["authorization"]
    assert fake.requests[0].headers["x-team-token"] == HEADER_SECRET
    shown = [str(e.value), repr(e.value), repr(e.value.attempts), repr(outcome.attempts), repr(p),
             repr(p.settings), *(r.getMessage() for r in caplog.records), caplog.text]
    for text in shown:
        assert SECRET not in text and HEADER_SECRET not in text
    assert "[redacted]" in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__
    assert fake.root_url not in str(e.value)
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_a_stream_that_breaks_after_output_began_is_restarted_and_says_so(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text=["a", "b"], cut=True), Reply(text=["sec", "ond"]))
    p = make(fake, api)
    outcome = RequestOutcome()
    events = await collect(p, request(), outcome)
    kinds = [type(e).__name__ for e in events]
    # The broken attempt's text, then the restart (before any of the new attempt's events), then
    # the new attempt from its start; the final message is the new attempt's alone.
    assert kinds == ["TextDelta", "TextDelta", "StreamRestarted", "TextDelta", "TextDelta", "Finished"]
    restart = events[2]
    assert isinstance(restart, StreamRestarted)
    assert (restart.attempt, restart.category) == (2, "connection") and restart.wait_s >= 0
    assert [e.text for e in events[:2]] == ["a", "b"] and texts(events[3:]) == ["sec", "ond"]
    assert finished(events).message.text == "second"
    assert [a.error_category for a in outcome.attempts] == ["connection", None]
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_a_broken_stream_with_no_retry_left_fails_naming_it(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text=["a", "b"], cut=True), Reply(text="never asked"))
    p = make(fake, api, retry=RetryPolicy(max_attempts=1))
    outcome = RequestOutcome()
    seen: list[str] = []
    with pytest.raises(ProviderError) as e:
        async for ev in p.stream(request(), outcome):
            assert not isinstance(ev, StreamRestarted)
            if hasattr(ev, "text"):
                seen.append(ev.text)  # type: ignore[union-attr]
    assert seen == ["a", "b"]
    assert e.value.category == "connection" and "after output began" in str(e.value)
    assert "provider.fake.options.maxRetries = 0" in str(e.value)
    assert len(outcome.attempts) == 1 and fake.pending == 1
    await p.aclose()


async def test_whole_request_succeeds_after_retries(fake: FakeProvider) -> None:
    fake.script(Fail(500), Fail(429, retry_after="0"), Reply(text=["x", "y"]))
    p = make(fake, "anthropic")
    events = await collect(p, request())
    assert finished(events).message.text == "xy"
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_an_overload_reported_in_the_stream_is_retried(fake: FakeProvider, api: str) -> None:
    body = ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}} if api == "anthropic"
            else {"error": {"message": "busy", "type": "server_error", "code": "server_error"}})
    fake.script(Fail(529, body=body, in_stream=True), Reply(text="back"))
    p = make(fake, api)
    outcome = RequestOutcome()
    assert texts(await collect(p, request(), outcome)) == ["back"]
    first = outcome.attempts[0]
    assert first.error_category == ("overloaded" if api == "anthropic" else "server")
    assert len(outcome.attempts) == 2
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_a_server_that_stalls_before_output_times_out_and_is_retried(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text=[], stall_s=5), Reply(text="prompt"))
    p = make(fake, api, read_timeout_s=0.3)
    outcome = RequestOutcome()
    assert texts(await collect(p, request(), outcome)) == ["prompt"]
    assert [a.error_category for a in outcome.attempts] == ["timeout", None]
    assert outcome.attempts[0].ended_at - outcome.attempts[0].started_at < 4
    await p.aclose()


@pytest.mark.parametrize(("api", "fail", "category"), [
    ("openai-chat", Fail(429, body={"error": {"message": "You exceeded your quota", "type": "insufficient_quota",
                                             "code": "insufficient_quota", "param": None}}), "quota"),
    ("openai-responses", Fail(400, body={"error": {"message": "too long", "type": "invalid_request_error",
                                                  "code": "context_length_exceeded", "param": None}}),
     "context_length"),
    ("anthropic", Fail(400, body={"type": "error", "error": {"type": "invalid_request_error",
                                                            "message": "prompt is too long: 210000 tokens > 200000"}}),
     "context_length"),
    ("anthropic", Fail(503, headers={"x-should-retry": "false"}), "not_retryable"),
])
async def test_failures_no_retry_can_help_fail_at_once(fake: FakeProvider, api: str, fail: Fail,
                                                       category: str) -> None:
    fake.script(fail, Reply(text="never"))
    p = make(fake, api)
    outcome = RequestOutcome()
    with pytest.raises(ProviderError) as e:
        await collect(p, request(), outcome)
    assert e.value.category == category and len(outcome.attempts) == 1 and fake.pending == 1
    await p.aclose()
