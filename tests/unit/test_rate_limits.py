"""Rate limits without a server: the rates, the token bucket on a fake clock, the in-process
limiter (all or nothing, its bound, its lock) and the refusal (zemcp.config.rates,
zemcp.state.buckets, zemcp.state.ratelimits)."""

import sys
import threading

import pytest

from zemcp.config.rates import MAX_COUNT, Rate, parse_rate, parse_tool_rates
from zemcp.state.buckets import LocalRateLimiter, TokenBucket
from zemcp.state.ratelimits import CLIENT_SCOPE, Limit, RateLimited, Shortfall, client_digest


class Clock:
    """A monotonic clock the test moves by hand [seconds]."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def limit(text, scope=CLIENT_SCOPE):
    return Limit(scope, parse_rate(text, "test"), "ZEMCP_RATE_LIMIT")


@pytest.mark.parametrize(
    "text, count, period, burst, shown",
    [
        ("120/minute", 120, 60.0, 120, "120/minute"),
        ("1/s", 1, 1.0, 1, "1/second"),
        (" 5 / M ", 5, 60.0, 5, "5/minute"),
        ("3/hour", 3, 3600.0, 3, "3/hour"),
        ("2/h", 2, 3600.0, 2, "2/hour"),
        ("10/second burst 50", 10, 1.0, 50, "10/second burst 50"),
        ("10/s burst 10", 10, 1.0, 10, "10/second"),
    ],
)
def test_a_rate_is_a_count_per_period_with_an_optional_burst(text, count, period, burst, shown):
    rate = parse_rate(text, "test")
    assert (rate.count, rate.period, rate.burst, rate.text) == (count, period, burst, shown)
    assert rate.per_second == count / period


@pytest.mark.parametrize(
    "text", ["", "120", "120/day", "120/minutes", "/minute", "-1/s", "1.5/s", "0/s", "1/s burst 0", "1/s burst", "x"]
)
def test_anything_else_is_refused_naming_the_source_and_the_form(text):
    with pytest.raises(ValueError) as info:
        parse_rate(text, "rate_limit (ZEMCP_RATE_LIMIT)")
    message = str(info.value)
    assert message.startswith("rate_limit (ZEMCP_RATE_LIMIT)"), message
    assert repr(text) in message, message
    if text not in ("0/s", "1/s burst 0"):
        assert "<count>/<second|minute|hour>" in message and "for example 120/minute" in message, message


def test_a_count_beyond_the_bound_is_refused():
    assert parse_rate(f"{MAX_COUNT}/s", "x").count == MAX_COUNT
    with pytest.raises(ValueError, match="between 1 and"):
        parse_rate(f"{MAX_COUNT + 1}/s", "x")


def test_tool_rates_are_comma_separated_pairs():
    rates = parse_tool_rates(" report=5/minute, search = 1/s burst 3 ,", "rate_limit_tools (ZEMCP_RATE_LIMIT_TOOLS)")
    assert rates == {"report": Rate(5, 60.0, 5), "search": Rate(1, 1.0, 3)}
    assert parse_tool_rates("", "x") == {}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("report", "takes comma-separated <tool>=<rate> pairs"),
        ("=5/minute", "takes comma-separated <tool>=<rate> pairs"),
        ("bad name=5/minute", "takes comma-separated <tool>=<rate> pairs"),
        ("report=5/minute,report=1/s", "names tool 'report' twice"),
        ("report=often", "for tool 'report' must be a rate"),
    ],
)
def test_bad_tool_rates_are_refused_naming_the_pair(text, expected):
    with pytest.raises(ValueError, match="rate_limit_tools \\(ZEMCP_RATE_LIMIT_TOOLS\\)") as info:
        parse_tool_rates(text, "rate_limit_tools (ZEMCP_RATE_LIMIT_TOOLS)")
    assert expected in str(info.value), info.value


def test_a_bucket_starts_full_and_fills_at_its_rate_up_to_its_burst():
    bucket = TokenBucket(parse_rate("2/second burst 4", "x"), now=10.0)
    assert bucket.level(10.0) == 4 and bucket.wait() == 0 and bucket.full(10.0)
    bucket.tokens = 0.0
    assert bucket.wait() == 0.5  # one token every half second
    assert bucket.level(10.25) == 0.5 and not bucket.full(10.25)
    assert bucket.level(11.0) == 2.0
    assert bucket.level(100.0) == 4.0 and bucket.full(100.0)
    bucket.refill(bucket.rate, 10.3)
    assert bucket.tokens == pytest.approx(0.6) and bucket.wait() == pytest.approx(0.2)


def test_the_limiter_takes_a_burst_then_tells_how_long_until_the_next_token():
    clock = Clock()
    limiter = LocalRateLimiter(clock)
    per_minute = limit("3/minute")
    assert [limiter.take("address a", [per_minute]) for _ in range(3)] == [None, None, None]
    refused = limiter.take("address a", [per_minute])
    assert refused == Shortfall(per_minute, pytest.approx(20.0))
    clock.now += 15
    assert limiter.take("address a", [per_minute]).wait == pytest.approx(5.0)
    clock.now += 5
    assert limiter.take("address a", [per_minute]) is None
    assert limiter.take("address a", [per_minute]).wait == pytest.approx(20.0)
    # Another client has a bucket of its own.
    assert limiter.take("address b", [per_minute]) is None


def test_a_request_takes_from_every_bucket_or_from_none():
    clock = Clock()
    limiter = LocalRateLimiter(clock)
    client, tool = limit("5/hour"), limit("1/hour", "tool report")
    assert limiter.take("address a", [client, tool]) is None
    refused = limiter.take("address a", [client, tool])
    assert refused.limit == tool and refused.wait == pytest.approx(3600.0)
    # The refused call took nothing from the client's bucket: 4 tokens are left there.
    assert [limiter.take("address a", [client]) for _ in range(4)] == [None] * 4
    both = limiter.take("address a", [client, tool])
    # Both are empty: the one that fills last is named (the tool's: 3600 s against 720 s).
    assert both.limit == tool and both.wait == pytest.approx(3600.0)
    assert limiter.take("address a", [client]).limit == client


def test_buckets_that_filled_up_again_are_forgotten():
    clock = Clock()
    limiter = LocalRateLimiter(clock)
    fast = limit("10/second")
    for n in range(100):
        assert limiter.take(f"address {n}", [fast]) is None
        clock.now += 0.01
    # Each bucket is full again 0.1 s after its take: only the last ten or so are kept.
    assert len(limiter) <= 12, len(limiter)


def test_the_buckets_are_bounded_and_the_longest_unused_goes_first():
    clock = Clock()
    limiter = LocalRateLimiter(clock, max_buckets=100)
    slow = limit("1/hour")
    for n in range(1000):
        assert limiter.take(f"address {n}", [slow]) is None
    assert len(limiter) == 100
    # The newest clients are still held to their limit; the oldest got a full bucket back.
    assert limiter.take("address 999", [slow]) is not None
    assert limiter.take("address 0", [slow]) is None


@pytest.fixture
def eager_switching():
    """Threads switch as often as the interpreter allows, so that an unlocked take would race."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_threads_taking_at_once_get_exactly_the_burst(eager_switching):
    limiter = LocalRateLimiter(Clock())  # the clock stands still: nothing comes back
    per_hour = limit("500/hour")
    tool = limit("300/hour", "tool report")

    def race(limits) -> list[int]:
        granted = []
        start = threading.Barrier(8)

        def run():
            start.wait()
            granted.append(sum(limiter.take("address a", limits) is None for _ in range(400)))

        threads = [threading.Thread(target=run) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(granted) == 8
        return granted

    # 3200 calls of the tool at once: exactly its 300 tokens, each also one of the client's 500.
    assert sum(race([per_hour, tool])) == 300
    # 3200 other requests at once: exactly the client's 200 left.
    assert sum(race([per_hour])) == 200


def test_the_refusal_names_the_limit_its_setting_and_the_wait():
    exc = RateLimited(Shortfall(limit("120/minute"), 2.2))
    assert (exc.status, exc.retry_after) == (429, 3)
    assert str(exc) == (
        "Too Many Requests: this client's rate limit (120/minute, ZEMCP_RATE_LIMIT) is used up; retry after 3 s"
    )
    assert exc.data == {"limit": "120/minute", "retryAfter": 3, "scope": "client"}
    tool = RateLimited(Shortfall(Limit("tool report", Rate(5, 60.0, 5), "the tool's rate_limit"), 0.01))
    assert tool.retry_after == 1  # never 0: a client told 0 would come back at once
    assert "rate limit for tool report (5/minute, the tool's rate_limit)" in str(tool)
    assert tool.data == {"limit": "5/minute", "retryAfter": 1, "scope": "tool report"}
    assert RateLimited(Shortfall(limit("1/s"), 12.0)).retry_after == 12


def test_a_client_is_keyed_by_a_digest_of_fixed_size():
    digests = {client_digest(f"address 10.0.0.{n}") for n in range(50)}
    assert len(digests) == 50 and {len(d) for d in digests} == {32}
    assert client_digest("principal " + "x" * 10000) != client_digest("principal " + "x" * 9999)
    assert "10.0.0" not in "".join(digests)
