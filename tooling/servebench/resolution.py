"""What a client's clock can time of a token stream (pure): decode steps, not bursts."""
from __future__ import annotations

# Two token events read less than this apart were already waiting in the client's buffer: the gap
# timed the client's read, not a decode step of the server. vLLM's API process merges the tokens it
# has not sent yet, so a fast engine's stream arrives in one event or back to back (a burst read
# here takes tens of microseconds per event); a decode step of any engine this project serves takes
# longer than a millisecond.
BURST_GAP_S = 0.001
NOT_MEASURED = "not measured"


def resolved_tpot_ms(tpot_ms: float | None) -> float | None:
    """A client-measured time per output token (vllm bench serve's), or None when it is below a
    decode step: the tokens after the first then came back to back, and 1000/TPOT would be a
    burst's delivery rate, not a decode speed."""
    return tpot_ms if tpot_ms is not None and tpot_ms >= 1000 * BURST_GAP_S else None


def spaced_gaps(arrivals: list[float]) -> int:
    """Gaps between consecutive token events long enough to be decode steps (pure)."""
    return sum(1 for a, b in zip(arrivals, arrivals[1:]) if b - a >= BURST_GAP_S)
