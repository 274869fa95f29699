"""Prints what the Turing clamp costs in Gemma 4 E2B's global (head 512) attention layers during
one prefill, and how each tile / stage choice that also fits sm_75 compares, on this machine's GPU.

  bench/clamp_share [--json PATH]

Run on an H200 through tests/gpu/run-on-device's environment (its staged vLLM package and fit
table; without $VLLM_TURING_GPU_SITE / $TURING_CLAMP_FIT_TABLE both are prepared from the vLLM
release cache). Timing runs in a child process under TURING_CLAMP_SMEM_LIMIT=65536. Per prompt
length (512 and 4096 tokens, one sequence) it times one unified_attention() call with vLLM's own
tiles, with the clamp's choice, and with every (TILE_SIZE, num_stages) the fit table says fits
sm_75, then scales by E2B's global layer count. The clamp's share is (clamped - default) over
clamped, of the global layers' attention time only (not the whole model's prefill).
"""
import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from contract.devices import TURING
from door.problem import Problem
from tooling.gpu_site import ensure_fit_table, ensure_site, python_env
from tooling.gpu_site import turing_needs
from door import files
from door import children

PROMPTS = (512, 4096)
E2B_GLOBAL_LAYERS = 7  # 35 layers, every fifth global
E2B_GLOBAL = dict(num_query_heads=8, num_kv_heads=1, head_size=512)


def fitting_choices(needs: dict, dtype: str = "float16") -> list[tuple]:
    """(BLOCK_M, num_warps, tile, num_stages) of the head-512 2D launches the sm_75 table says fit."""
    return sorted({(key[3], key[4], tile, key[5]) for key, by_tile in needs.items()
                   if key[0] == "2d" and key[1] == 512 and key[2] == dtype
                   for tile, shared in by_tile.items() if shared <= TURING.limit},
                  key=lambda c: tuple(x or 0 for x in c))


def child(choices: list) -> dict:
    """In the GPU process: ms per call for default, clamp and each choice, per prompt length."""
    import importlib

    from triton.testing import do_bench

    from tooling.attention_cases import Case, Layer
    from tooling.paged_attention import make_batch
    from tooling.unified_attention_run import LAUNCHER_MODULE, attention_call

    module = importlib.import_module(LAUNCHER_MODULE)
    clamp = module._vllm_turing_clamp
    layer = Layer("e2b-global-h512", E2B_GLOBAL["num_query_heads"], E2B_GLOBAL["num_kv_heads"], 512, None)
    results = {}
    for tokens in PROMPTS:
        batch = make_batch(Case(layer, "prefill", ((tokens, tokens),)), device="cuda")
        launch, _ = attention_call(module, batch, layer)
        timings, chosen = {}, {}

        def forced(tile, stages):
            def pick(q, block_m, tile_prefill, tile_decode, num_warps=None, num_stages=None, **_):
                return tile, tile_decode, stages if stages is not None else num_stages
            return pick

        def wrapped(q, block_m, *args, **kwargs):
            decision = clamp(q, block_m, *args, **kwargs)
            chosen.update(tile=decision[0], stages=decision[2] if len(decision) > 2 else None,
                          default_tile=args[0], block_m=block_m, num_warps=args[2] if len(args) > 2 else None)
            return decision

        module._vllm_turing_clamp = wrapped
        timings["clamped"] = do_bench(launch, warmup=25, rep=200, return_mode="median")
        # Only choices of this launch's BLOCK_M and warps: the table's figures are for those.
        for _, _, tile, stages in (c for c in choices if c[:2] == (chosen["block_m"], chosen["num_warps"])):
            module._vllm_turing_clamp = forced(tile, stages)
            timings[f"tile {tile} stages {stages}"] = do_bench(launch, warmup=25, rep=200, return_mode="median")
        module._vllm_turing_clamp = lambda q, block_m, p, d, w=None, s=None, **_: (p, d, s)
        timings["default"] = do_bench(launch, warmup=25, rep=200, return_mode="median")
        module._vllm_turing_clamp = clamp
        results[tokens] = {"ms_per_layer": timings, "clamp_choice": chosen}
        del batch, launch
    return results


def render(results: dict) -> str:
    lines = []
    for tokens, r in results.items():
        t = r["ms_per_layer"]
        default, clamped = t["default"] * E2B_GLOBAL_LAYERS, t["clamped"] * E2B_GLOBAL_LAYERS
        lines.append(f"E2B prefill of {tokens} tokens, {E2B_GLOBAL_LAYERS} global layers: vLLM tiles {default:.3f} ms, "
                     f"clamp {clamped:.3f} ms (choice {r['clamp_choice']}); clamp's share "
                     f"{(clamped - default) / clamped:.1%} of the global layers' attention")
        for name, ms in sorted(t.items(), key=lambda item: item[1]):
            lines.append(f"  {name:>22}: {ms:.4f} ms per layer ({ms / t['clamped']:.2f}x the clamp's)")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        choices = files.own_json(os.environ["VLLM_TURING_BENCH_CHOICES"])
        args.child.write_text(json.dumps(child([tuple(c) for c in choices])))
        return 0
    with tempfile.TemporaryDirectory(prefix="clamp-share-") as tmp:
        scratch = Path(tmp)
        try:
            site = ensure_site(scratch)
            table = ensure_fit_table(site, scratch)
        except Problem as error:
            print(f"bench/clamp_share: {error}", file=sys.stderr)
            return 1
        choices = fitting_choices(turing_needs(table))
        if not choices:
            print(f"bench/clamp_share: {table} has no head-512 2D entry that fits sm_75; rewrite it "
                  "with `python -m patches.fitcheck --write-table PATH`", file=sys.stderr)
            return 1
        env = python_env(site, table, TURING_CLAMP_SMEM_LIMIT=str(TURING.limit),
                         VLLM_TURING_BENCH_CHOICES=json.dumps(choices))
        done = children.run([sys.executable, str(REPO / "bench" / "clamp_share"), "--child", str(scratch / "out.json")], cwd=REPO, env=env)
        if done.returncode:
            print(f"bench/clamp_share: the timing process exited {done.returncode}:\n"
                  + "\n".join(done.stderr.strip().splitlines()[-15:]), file=sys.stderr)
            return 1
        results = files.own_json(files.read_own(scratch / "out.json"))
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0

