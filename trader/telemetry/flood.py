"""What keeps a flood on the command topic cheap: a token bucket that refuses payloads unread
once over the rate (before their signature is checked: parsing and answering is what a flood
costs), and a throttle that lets one answer and one log line out per kind of refusal and
interval, counting the rest for the next line.

One bucket per daemon, for its command topic: MQTT (3.1.1 and 5) tells a subscriber nothing
about who published a message (a v5 user property is the publisher's own claim, so keying on it
would let a flood pick a fresh key per message). Per-client limits belong to the broker (its
ACL decides who may publish on `<prefix>/<instance>/cmd` at all). Both run on a monotonic clock
passed in by the caller, so a wall-clock step neither refills nor empties them."""

from __future__ import annotations


class TokenBucket:
    """`rate_per_s` payloads a second on average, `burst` at once."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._tokens = float(burst)
        self._at: float | None = None

    def take(self, now: float) -> bool:
        """One token, if there is one at `now` (monotonic seconds)."""
        if self._at is not None and now > self._at:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate_per_s)
        self._at = now if self._at is None else max(self._at, now)
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class Throttle:
    """At most one line per key and `interval_s` (0: every one)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def due(self, key: str, now: float) -> int | None:
        """None: hold this one back (it is counted). Else it may go out, and this many were
        held back since the last one for `key`."""
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)
