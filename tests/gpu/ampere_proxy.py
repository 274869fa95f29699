"""The Ampere-lowered proxy for the GPU tier, in fp16 and in bf16: an RTX 3090 runs an fp16 model in fp16
and a bf16 checkpoint in bf16, and the clamp looks its ranked configurations for cc 86 up by dtype
(patches/turing_clamp/ranked-configs.json holds both). The tier's own runners, launched as this module,

    python -m tests.gpu.ampere_proxy unified DTYPE --out DIR [--cases A,B]   # tooling.unified_attention_run
    python -m tests.gpu.ampere_proxy encoder DTYPE --out DIR [--heads 64,72]  # tooling.encoder_attention_run

run unchanged but with their batches in DTYPE (the encoder's simulated device also answers cc 8.6 at
Ampere's 101,376 bytes, so vLLM picks Ampere's BLOCK); the caller (`AmpereRuns`) sets the Ampere lowering
(TRITON_OVERRIDE_ARCH=sm86), the limit, the fit table for sm_86 in that dtype and the ranked
configurations. bf16 never under the sm75 lowering: Turing has no bf16 (vLLM runs a bf16 checkpoint in
fp16 there).

torch is imported only where a run needs it, so the tier collects on hosts without it.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from contract.devices import DEVICES
from tooling import clamp_ranking as ranking

DTYPES = ("float16", "bfloat16")
LOWERING = "sm86"
AMPERE_CC, AMPERE_LIMIT = DEVICES[LOWERING]
assert LOWERING != "sm75", "Turing has no bf16: bf16 runs only on the Ampere proxy"
# bf16 keeps 8 significant bits (7 stored), fp16 11 (10 stored), so bf16's rounding unit is 2**3 = 8 times
# fp16's. Every error the tier bounds is rounding to the activations' dtype (the output store, the softmax
# weights cast to V's dtype before P @ V; the inputs are rounded for the fp32 reference too, so they add
# none), so an fp16 bound times 8 is the same bound in bf16 (outputs in [4, 8): half an ulp is 1.95e-3 in
# fp16, 1.56e-2 in bf16).
BF16_OVER_FP16_ROUNDING = 2 ** (11 - 8)


def bf16_bound(fp16_bound: float) -> float:
    """The tier's fp16 error bound scaled to bf16's rounding (BF16_OVER_FP16_ROUNDING)."""
    return fp16_bound * BF16_OVER_FP16_ROUNDING


def ranked_file() -> Path:
    """The ranked configurations the tier's clamp reads ($TURING_CLAMP_RANKED_CONFIGS, as
    tests/gpu/run-on-device sets it), else the committed file."""
    return Path(os.environ.get(ranking.ENV_RANKED) or ranking.RANKED_FILE)


def ranked_launch(document: dict, dtype: str, path: str, head_size_padded: int, case: str | None = None) -> dict:
    """The ranking's one `dtype` launch on cc 86 of `path` ("2d", "3d", "encoder") at that padded head size
    (and ranked from `case`, for the unified kernel, whose layers of one head size vLLM tiles apart)."""
    found = [launch for launch in document["launches"]
             if (launch["cc"], launch["dtype"], launch["path"], launch["head_size_padded"]) ==
             (AMPERE_CC, dtype, path, head_size_padded) and (case is None or case in launch["cases"])]
    assert len(found) == 1, (f"{len(found)} ranked {dtype} launches on cc {AMPERE_CC} for {path}, head "
                             f"{head_size_padded}{f', case {case}' if case else ''}; expected one (the ranking's "
                             f"rows: bench/clamp_gpu [--dtype bfloat16], docs/gpu-validation.md)")
    return found[0]


def ranked_choice(launch: dict, limit: int = AMPERE_LIMIT) -> dict:
    """The ranked row the clamp must launch, by the ranking's rule (tooling/clamp_ranking.py): the
    best-scored configuration that fits `limit`, unless the fail-safe one (the largest tile up to vLLM's,
    at vLLM's own warps and stages, that fits) scores within KEEP_MARGIN of the fastest (1), or of the best
    when that scores above the margin. Rows name vLLM's own
    options as the launch does (None for the unified kernel), so a row is what the launch records."""
    fitting = [row for row in launch["ranked"] if row["shared"] <= limit]
    assert fitting, f"nothing ranked for {launch} fits {limit:,} bytes"
    own = (launch["num_warps"], launch["num_stages"])
    fail_safe = max((row for row in fitting if (row["num_warps"], row["num_stages"]) == own
                     and row["tile_size"] <= launch["vllm_tile_size"]), key=lambda row: row["tile_size"], default=None)
    best = fitting[0]
    bound = ranking.KEEP_MARGIN * (1 if best["score"] <= ranking.KEEP_MARGIN else best["score"])
    if fail_safe is not None and fail_safe["score"] <= bound:
        return fail_safe
    return best


def configuration(row: dict) -> tuple:
    return row["tile_size"], row["num_warps"], row["num_stages"]


class AmpereRuns:
    """The `dtype` runs of both kernels on the Ampere proxy, started in the background when made (their
    compiles then overlap the Turing modes'): the fit table for sm_86 in `dtype` first (tooling.gpu_site
    takes the one tests/gpu/run-on-device hands over when it holds that dtype, its fp16 one, else writes
    one under `scratch`), then the unified kernel's clamped run and the encoder's side by side, each in its
    own process. `unified()` / `encoder()`: (output folder, the runner's launches.json), waiting for the run."""

    def __init__(self, site: Path, scratch: Path, dtype: str, cases, heads):
        from tooling.gpu_site import ensure_fit_table

        assert dtype in DTYPES, dtype
        self.site, self.scratch, self.dtype, self.ranked = site, scratch, dtype, ranked_file()
        self._pool = ThreadPoolExecutor(max_workers=2)
        self.table = self._pool.submit(ensure_fit_table, site, scratch, LOWERING, dtype)
        self._unified = self._pool.submit(self._run, "unified", "--cases", ",".join(cases))
        self._encoder = self._pool.submit(self._run, "encoder", "--heads", ",".join(map(str, heads)))

    def unified(self) -> tuple[Path, dict]:
        return self._unified.result()

    def encoder(self) -> tuple[Path, dict]:
        return self._encoder.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _run(self, kernel: str, *selection: str) -> tuple[Path, dict]:
        from contract import layout
        from door.problem import Problem
        from tooling.gpu_site import REPO, python_env

        out = self.scratch / f"{kernel}-{LOWERING}-{self.dtype}"
        extra = {ranking.ENV_RANKED: str(self.ranked), "TRITON_OVERRIDE_ARCH": LOWERING}
        if kernel == "unified":  # the encoder's simulated device sets the limit itself
            extra[layout.ENV_SMEM_LIMIT] = str(AMPERE_LIMIT)
        env = python_env(self.site, self.table.result(), **extra)
        done = subprocess.run([sys.executable, "-m", __name__, kernel, self.dtype, "--out", str(out), *selection],
                              cwd=REPO, env=env, capture_output=True, text=True)
        if done.returncode:
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise Problem(f"{kernel} attention in {self.dtype} ({LOWERING}) exited {done.returncode}:\n{tail}")
        return out, json.loads((out / "launches.json").read_text())


def main(argv: list[str]) -> int:
    import torch

    if len(argv) < 2 or argv[0] not in ("unified", "encoder") or argv[1] not in DTYPES:
        print(f"usage: python -m tests.gpu.ampere_proxy unified|encoder {'|'.join(DTYPES)} --out DIR "
              "[runner options]", file=sys.stderr)
        return 2
    dtype = getattr(torch, argv[1])
    if argv[0] == "unified":
        from tooling import unified_attention_run as runner

        runner.make_batch = functools.partial(runner.make_batch, dtype=dtype)
    else:
        from tooling import encoder_attention_run as runner

        runner.encoder_batch = functools.partial(runner.encoder_batch, dtype=dtype)
        runner.SIMULATED = DEVICES[LOWERING]  # what its simulated device answers
    return runner.main(argv[2:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
