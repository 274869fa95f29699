"""The fp16 upcast's proof and cost, on the 12B's vision embedder as a release's gemma4_unified.py builds it.

vLLM's Gemma4UnifiedVisionEmbedder cannot be built outside a running engine: its patch_dense is a
ColumnParallelLinear, which asks vLLM's tensor-parallel group for its rank. So the class is lifted from the
release's file: its own text, unpatched or patched by the very placement the image's build runs
(patches/fp16_upcast), executed with torch and with patch_dense bound to StandinColumnParallelLinear, which
computes what vLLM's unquantized path computes at one rank (F.linear of the input, weight and bias, the
output gathered: nothing to gather at one rank) and hands back (output, None) as the layer does.

The inputs reach the overflow the upstream report describes: high-contrast patches (a pixel checkerboard
at full range, 48x48x3 = 6,912 values), and patch_dense weights whose rows carry that pattern scaled so
that the 6,912-wide reduction exceeds fp16's 65,504 for some output channels (the others are noise).

    python3 -m tooling.fp16_upcast [--patches N] [--repeats N] [--source FILE]   # the bench (GPU)
    python3 -m tooling.fp16_upcast --releases [--write-doc docs/fp16.md]          # the release table
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from door.problem import Problem
from patches.fp16_upcast.placement import (
    BEGIN_MARKER,
    END_MARKER,
    is_own,
    find_forward,
    insert_upcast,
)
from patches.placing import block_lines, parse

# The 12B's vision config (transformers' Gemma4UnifiedVisionConfig defaults, which the published config.json
# keeps: patch_size 16 x pooling_kernel_size 3 = model_patch_size 48; mm_embed_dim 3840; mm_posemb_size 1120).
MODEL_PATCH_SIZE = 48
PATCH_DIM = MODEL_PATCH_SIZE ** 2 * 3
MM_EMBED_DIM = 3840
MM_POSEMB_SIZE = 1120
FP16_MAX = 65504.0
# The share of output channels whose row carries the checkerboard, and their scale's range: |scale| * 6,912
# reaches up to 12 * 6,912 = 82,944, past fp16's 65,504 for |scale| > 9.48.
ALIGNED_SHARE = 0.25
SCALE_MAX = 12.0


class UnquantizedLinearMethod:
    """Stand-in named as vLLM's unquantized linear method: the upcast asks the method's class name
    (runtime.py) to tell an unquantized patch_dense from a quantized one."""


def standin_linear_class():
    import torch
    import torch.nn.functional as F
    from torch import nn

    class StandinColumnParallelLinear(nn.Module):
        """vLLM's ColumnParallelLinear at one rank, unquantized (the forward of vLLM 0.33.0's layer with
        UnquantizedLinearMethod.apply: F.linear(x, weight, bias); gather_output at one rank is the output)."""

        def __init__(self, input_size, output_size, bias=True, quant_config=None, prefix="", gather_output=False,
                     **_):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(output_size, input_size), requires_grad=False)
            self.bias = nn.Parameter(torch.zeros(output_size), requires_grad=False) if bias else None
            self.quant_method = UnquantizedLinearMethod()
            self.gather_output, self.tp_size, self.skip_bias_add = gather_output, 1, False

        def forward(self, input_):
            return F.linear(input_, self.weight, self.bias), None

    return StandinColumnParallelLinear


def lifted_class(source: str, label: str):
    """The class Gemma4UnifiedVisionEmbedder as `source` defines it (with the upcast's runtime block where
    the source carries it), patch_dense a StandinColumnParallelLinear."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    tree = parse(source)
    cls, _ = find_forward(tree)
    lines = source.splitlines(keepends=True)
    block = "".join(lines[i] for i in block_lines(lines, [s for s in tree.body if is_own(s)], BEGIN_MARKER,
                                                   END_MARKER))
    text = block + "".join(lines[cls.lineno - 1:cls.end_lineno])
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math, "ColumnParallelLinear": standin_linear_class(),
                 "__name__": f"lifted_{label}"}
    exec(compile(text, f"<{label}: {cls.name}>", "exec"), namespace)  # the release's own text
    return namespace[cls.name]


class VisionConfig:
    """The fields Gemma4UnifiedVisionEmbedder reads from its config (the 12B's values)."""
    model_patch_size = MODEL_PATCH_SIZE
    mm_embed_dim = MM_EMBED_DIM
    mm_posemb_size = MM_POSEMB_SIZE


def classes(source: str) -> dict:
    """{"unpatched": class, "patched": class} from one release's gemma4_unified.py."""
    return {"unpatched": lifted_class(source, "unpatched"), "patched": lifted_class(insert_upcast(source), "patched")}


def checkerboard(patches: int, seed: int = 0):
    """[1, patches, 6912] pixel patches: every other patch a pixel checkerboard at full range (-1/+1, its
    phase flipped at random), the rest smooth gradients; and their [1, patches, 2] grid positions."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    y, x = torch.meshgrid(torch.arange(MODEL_PATCH_SIZE), torch.arange(MODEL_PATCH_SIZE), indexing="ij")
    board = (((x + y) % 2) * 2 - 1).float().unsqueeze(-1).expand(-1, -1, 3).reshape(-1)
    ramp = (x.float() / MODEL_PATCH_SIZE).unsqueeze(-1).expand(-1, -1, 3).reshape(-1)
    flips = torch.randint(0, 2, (patches,), generator=generator).float() * 2 - 1
    rows = [board * flips[i] if i % 2 == 0 else ramp * (1 + i % 5) for i in range(patches)]
    side = math.ceil(math.sqrt(patches))
    positions = torch.tensor([[i % side, i // side] for i in range(patches)])
    return torch.stack(rows).unsqueeze(0), positions.unsqueeze(0)


def load_weights(module, seed: int = 0) -> None:
    """Weights rounded to fp16 (one set of numbers for every dtype): LayerNorms at identity, patch_dense
    rows noise plus, for ALIGNED_SHARE of them, the checkerboard scaled by up to +-SCALE_MAX; small
    position embeddings."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    board, _ = checkerboard(1, seed)
    pattern = board[0, 0] / board[0, 0].abs().max()
    weight = torch.randn(MM_EMBED_DIM, PATCH_DIM, generator=generator) * 0.02
    aligned = torch.rand(MM_EMBED_DIM, generator=generator) < ALIGNED_SHARE
    scales = (torch.rand(MM_EMBED_DIM, generator=generator) * 2 - 1) * SCALE_MAX
    weight[aligned] += scales[aligned, None] * pattern
    state = {"patch_dense.weight": weight, "patch_dense.bias": torch.randn(MM_EMBED_DIM, generator=generator) * 0.1,
             "pos_embedding": torch.randn(MM_POSEMB_SIZE, 2, MM_EMBED_DIM, generator=generator) * 0.02}
    with torch.no_grad():
        for name, value in state.items():
            module.get_parameter(name).copy_(value.half().float())


def build(cls, dtype, device: str, seed: int = 0):
    module = cls(VisionConfig())
    load_weights(module, seed)
    return module.to(device=device, dtype=dtype).eval()


@dataclass
class Proof:
    """The figures of one comparison against fp32."""
    patches: int
    reduction_max: float        # the largest |patch_dense output| in fp32, against fp16's 65,504
    unpatched_nan: float        # share of NaN values in the unpatched fp16 output
    patched_finite: bool
    max_abs_error: float        # patched fp16 against fp32
    max_rel_error: float
    mean_abs_error: float
    bf16_identical: bool        # patched and unpatched, bf16: the same tensor

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def prove(source: str, device: str, patches: int = 64, seed: int = 0) -> Proof:
    """Runs the release's embedder unpatched and patched, in fp16, bf16 and fp32, on the same inputs."""
    import torch

    lifted = classes(source)
    pixels, positions = checkerboard(patches, seed)
    pixels, positions = pixels.to(device), positions.to(device)
    with torch.no_grad():
        reference_module = build(lifted["unpatched"], torch.float32, device, seed)
        reference = reference_module(pixels, positions)
        dense, _ = reference_module.patch_dense(reference_module.patch_ln1(pixels))
        out = {name: build(cls, torch.float16, device, seed)(pixels, positions) for name, cls in lifted.items()}
        bf16 = [build(cls, torch.bfloat16, device, seed)(pixels, positions) for cls in lifted.values()]
    error = (out["patched"].float() - reference).abs()
    return Proof(patches=patches, reduction_max=float(dense.abs().max()),
                 unpatched_nan=float(torch.isnan(out["unpatched"]).float().mean()),
                 patched_finite=bool(torch.isfinite(out["patched"]).all()),
                 max_abs_error=float(error.max()),
                 max_rel_error=float((error / reference.abs().clamp_min(1e-2)).max()),
                 mean_abs_error=float(error.mean()), bf16_identical=bool(torch.equal(*bf16)))


def time_forward(module, pixels, positions, repeats: int) -> list[float]:
    """Wall times in ms of `repeats` forwards after a warm-up, each synchronised."""
    import torch

    times = []
    with torch.no_grad():
        for i in range(repeats + 3):
            torch.cuda.synchronize()
            start = time.perf_counter()
            module(pixels, positions)
            torch.cuda.synchronize()
            if i >= 3:
                times.append((time.perf_counter() - start) * 1e3)
    return times


def bench(source: str, patches: int, repeats: int) -> dict:
    """Median forward time of the embedder in fp16, unpatched and patched, on the GPU."""
    import torch

    lifted = classes(source)
    pixels, positions = checkerboard(patches)
    pixels, positions = pixels.to("cuda"), positions.to("cuda")
    rows = {}
    for name, cls in lifted.items():
        times = time_forward(build(cls, torch.float16, "cuda"), pixels, positions, repeats)
        rows[name] = {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times)}
    rows["patched_over_unpatched"] = rows["patched"]["median_ms"] / rows["unpatched"]["median_ms"]
    return {"device": torch.cuda.get_device_name(0), "patches": patches, "repeats": repeats, "rows": rows}


def staged_source() -> tuple[str, str]:
    """(the pinned release's gemma4_unified.py, where it came from), from the GPU tier's staged vLLM site
    (tooling/gpu_site.py: $VLLM_TURING_GPU_SITE, else unpacked from the cached package tarball into a
    temporary folder, removed once the file is read)."""
    import tempfile

    from patches.fp16_upcast.placement import TARGET_IN_PACKAGE
    from tooling.gpu_site import ensure_site

    with tempfile.TemporaryDirectory(prefix="fp16-upcast-") as scratch:
        path = ensure_site(Path(scratch)) / "vllm" / TARGET_IN_PACKAGE
        return path.read_text(encoding="utf-8"), f"vLLM {vllm_version_of_site(path)}'s {TARGET_IN_PACKAGE}"


def vllm_version_of_site(path: Path) -> str:
    from patches.fp16_upcast.placement import TARGET_IN_PACKAGE
    from patches.placing import vllm_version_at

    return vllm_version_at(path, TARGET_IN_PACKAGE)


TABLE_BEGIN = "<!-- fp16-releases:begin (python3 -m tooling.fp16_upcast --releases --write-doc docs/fp16.md) -->"
TABLE_END = "<!-- fp16-releases:end -->"
CYCLED = "placed once, same bytes again, stripped to the original"


def release_table() -> str:
    """The Markdown table of the upcast over every release (tooling.vllm_releases): the file's sha256, where
    vLLM's two lines are, and what a cycle of apply, apply again and strip did."""
    import hashlib

    from patches.fp16_upcast.placement import count_upcast, plan, strip_upcast
    from tooling import vllm_releases

    rows = ["| release | gemma4_unified.py (sha256) | vLLM's two lines | apply, again, strip |",
            "| --- | --- | --- | --- |"]
    for version in vllm_releases.RELEASES:
        path = vllm_releases.release_member(version, vllm_releases.GEMMA4_UNIFIED_MEMBER)
        if path is None:
            rows.append(f"| {version} | not in the release | - | nothing to patch (`none`) |")
            continue
        source = path.read_text(encoding="utf-8")
        where = plan(source)
        patched = insert_upcast(source)
        cycle = (count_upcast(parse(patched)).present_once and insert_upcast(strip_upcast(patched)) == patched
                 and strip_upcast(patched) == source)
        rows.append(f"| {version} | `{hashlib.sha256(source.encode()).hexdigest()[:12]}` | "
                    f"{where.first + 1}-{where.last + 1} | {CYCLED if cycle else 'FAIL'} |")
    return "\n".join(rows) + "\n"


def with_table(text: str, table: str) -> str:
    start, end = text.index(TABLE_BEGIN), text.index(TABLE_END)
    return text[:start] + TABLE_BEGIN + "\n" + table + text[end:]


def positive(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/fp16_patch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patches", type=positive, default=2520, help="patches per image (default 2520: a 2,016x"
                        "2,880 image at 48x48 pixels a patch; the 12B's largest image budget is of this order)")
    parser.add_argument("--repeats", type=positive, default=50, help="timed forwards of each (median reported)")
    parser.add_argument("--source", type=Path, help="a gemma4_unified.py (default: the GPU tier's staged vLLM)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--releases", action="store_true", help="print the table of the upcast over every "
                        "release (no GPU needed)")
    parser.add_argument("--write-doc", type=Path, help="with --releases: the Markdown file whose table to replace")
    args = parser.parse_args(argv)
    if args.releases:
        table = release_table()
        print(table, end="")
        if args.write_doc:
            args.write_doc.write_text(with_table(args.write_doc.read_text(encoding="utf-8"), table), encoding="utf-8")
        return 0
    import torch

    if not torch.cuda.is_available():
        print("no GPU: bench/fp16_patch times the embedder on a CUDA device", file=sys.stderr)
        return 2
    try:
        source, where = (args.source.read_text(encoding="utf-8"), str(args.source)) if args.source else staged_source()
        classes(source)
    except (OSError, UnicodeDecodeError, Problem, RuntimeError) as error:  # SiteError, ReleaseUnavailable
        print(f"--source {args.source or '(the staged vLLM)'}: not a readable gemma4_unified.py with the 12B's "
              f"embedder ({str(error).splitlines()[0]}); pass vLLM's model_executor/models/gemma4_unified.py",
              file=sys.stderr)
        return 2
    proof = prove(source, "cuda")
    result = {"source": where, "proof": proof.to_dict(), **bench(source, args.patches, args.repeats)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    rows = result["rows"]
    print(f"fp16 upcast on {result['device']} ({where})")
    print(f"  proof, {proof.patches} patches: fp32 patch_dense max |x| {proof.reduction_max:,.0f} (fp16 max "
          f"{FP16_MAX:,.0f}); unpatched fp16 NaN share {proof.unpatched_nan:.3f}; patched finite "
          f"{proof.patched_finite}, max abs err {proof.max_abs_error:.4g}, max rel err {proof.max_rel_error:.4g}, "
          f"mean abs err {proof.mean_abs_error:.4g}; bf16 identical {proof.bf16_identical}")
    for name in ("unpatched", "patched"):
        row = rows[name]
        print(f"  {name:9s} fp16 forward, {args.patches} patches: median {row['median_ms']:.3f} ms "
              f"(min {row['min_ms']:.3f}, max {row['max_ms']:.3f}, {args.repeats} runs)")
    print(f"  patched / unpatched: {rows['patched_over_unpatched']:.2f}x "
          f"(+{rows['patched']['median_ms'] - rows['unpatched']['median_ms']:.3f} ms an image)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
