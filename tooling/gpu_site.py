"""A runnable, clamped copy of the pinned vLLM's Python package for the GPU tier.

The GPU machine has torch and Triton but no vLLM, and vLLM's compiled extensions are
not needed by its Triton attention kernel. vLLM 0.33.0's kernel runs there from the
package's Python files plus three things: the dist-info METADATA (vLLM looks its own
version up and disables Triton when it cannot) and two empty modules standing in for
the compiled `vllm._C` and `vllm._C_stable_libtorch`, which the CUDA platform imports.

The runner (tests/gpu/run-on-device) prepares the site and the fit table once and hands
them to pytest and the benchmark through VLLM_TURING_GPU_SITE / TURING_CLAMP_FIT_TABLE;
without those variables `ensure_site()` / `ensure_fit_table()` prepare their own.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from contract import layout
from contract.devices import TURING
from door.problem import Problem
from patches import turing_clamp
from tooling.clamp_ranking import ENV_RANKED

REPO = Path(__file__).resolve().parents[1]
SITE_ENV = "VLLM_TURING_GPU_SITE"
TABLE_ENV = layout.ENV_FIT_TABLE
# The fit table compiled for sm_86 (Ampere's limit), kept apart from the sm_75 one: on a GPU of
# another capability the clamp takes the largest need over every capability a table holds.
AMPERE_TABLE_ENV = "VLLM_TURING_GPU_FIT_TABLE_SM86"
LAUNCHER = Path("vllm/v1/attention/ops/triton_unified_attention.py")
COMPILED_EXTENSIONS = ("_C", "_C_stable_libtorch")


def add_compiled_extension_standins(site: Path) -> list[Path]:
    """Empty vllm/_C.py and vllm/_C_stable_libtorch.py: importable, with no kernels in them."""
    written = []
    for name in COMPILED_EXTENSIONS:
        standin = site / "vllm" / f"{name}.py"
        if not standin.exists():
            standin.write_text('"""Empty stand-in for a compiled vLLM extension (GPU tier)."""\n')
            written.append(standin)
    return written


def prepare_site(tarball: Path, site: Path) -> dict:
    """Unpack the package tarball into `site`, add the stand-ins, apply the clamp at both its sites
    (unified attention, encoder attention) as the image's build does; the unified site's report."""
    site.mkdir(parents=True, exist_ok=True)
    if not (site / LAUNCHER).is_file():
        with tarfile.open(tarball) as tar:
            tar.extractall(site, filter="data")
    if not (site / LAUNCHER).is_file():
        raise Problem(f"{tarball} holds no {LAUNCHER}; expected the vllm package's Python files "
                        "(tooling.vllm_releases.package_tarball)")
    add_compiled_extension_standins(site)
    reports = {}
    for clamp_site in turing_clamp.SITES.values():
        target = site / "vllm" / clamp_site.target_in_package
        report = reports[clamp_site.name] = turing_clamp.apply(target, clamp_site).to_dict()
        if report["outcome"] not in ("applied", "already"):
            raise Problem(f"the clamp was not placed in {target}: {report['outcome']}: {report['message']}")
    return reports["unified"]


def python_env(site: Path, fit_table: Path | None = None, **extra: str) -> dict:
    """The environment of a process that imports the site's vLLM and our code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), str(REPO), env.get("PYTHONPATH")]))
    if fit_table is not None:
        env[TABLE_ENV] = str(fit_table)
    for name in (layout.ENV_SMEM_LIMIT, *layout.DEPRECATED_ENV_NAMES):
        env.pop(name, None)
    env.update(extra)
    return env


def write_fit_table(site: Path, table: Path, device: str = "sm75", dtype: str = "float16") -> dict:
    """Run the fit check for `device`, its launches in `dtype`, on the site's launcher; its JSON report (the
    table is at `table`)."""
    # the site is vLLM's Python files alone: the mixers' ops would import its runtime's dependencies
    command = [sys.executable, "-m", "patches.fitcheck", "--device", device, "--matrix", "attention",
               "--dtype", dtype, "--write-table", str(table), "--json"]
    done = subprocess.run(command, cwd=REPO, env=python_env(site), capture_output=True, text=True)
    if done.returncode not in (0, 1) or not table.is_file():
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Problem(f"the fit check exited {done.returncode} without a table: {tail}")
    return json.loads(done.stdout)


def ensure_site(scratch: Path) -> Path:
    """The prepared site: $VLLM_TURING_GPU_SITE, else one unpacked under `scratch` from the cache."""
    if os.environ.get(SITE_ENV):
        site = Path(os.environ[SITE_ENV])
        if not (site / LAUNCHER).is_file():
            raise Problem(f"{SITE_ENV}={site} holds no {LAUNCHER}; run tests/gpu/run-on-device or unset it")
        return site
    from tooling.vllm_releases import PINNED, package_tarball

    site = scratch / "site"
    prepare_site(package_tarball(PINNED), site)
    return site


def ensure_fit_table(site: Path, scratch: Path, device: str = "sm75", dtype: str = "float16") -> Path:
    """The fit table for `device` holding launches in `dtype` (sm75: $TURING_CLAMP_FIT_TABLE, sm86:
    $VLLM_TURING_GPU_FIT_TABLE_SM86) when it exists and holds them, else one written under `scratch`
    (tests/gpu/run-on-device writes its tables in fp16, so a bf16 run writes its own)."""
    env = TABLE_ENV if device == "sm75" else AMPERE_TABLE_ENV
    given = os.environ.get(env)
    if given and Path(given).is_file():
        try:
            held = holds_dtype(json.loads(Path(given).read_text()), dtype)
        except (OSError, ValueError, AttributeError, TypeError) as error:
            raise Problem(f"{env}={given} is not a readable fit table ({error}); rewrite it with "
                            "tests/gpu/run-on-device run or unset it") from None
        if held:
            return Path(given)
    table = scratch / fit_table_name(device, dtype)
    write_fit_table(site, table, device, dtype)
    return table


def holds_dtype(table: dict, dtype: str) -> bool:
    """Whether a fit table has entries of launches in `dtype` (the clamp looks its launches up by dtype)."""
    return any(entry.get("dtype") == dtype for entry in table.get("entries", ()))


def fit_table_name(device: str, dtype: str = "float16") -> str:
    name = "fit-table" if device == "sm75" else f"fit-table-{device}"
    return name + (".json" if dtype == "float16" else f"-{dtype}.json")


def turing_needs(table: Path) -> dict[tuple, dict[int, int]]:
    """{(path, head_size_padded, dtype, block_m, num_warps, num_stages): {tile: shared}} for sm_75."""
    needs: dict[tuple, dict[int, int]] = {}
    for entry in json.loads(table.read_text())["entries"]:
        if entry["cc"] == TURING.cc:
            key = (entry["path"], entry["head_size_padded"], entry["dtype"], entry["block_m"],
                   entry["num_warps"], entry["num_stages"])
            needs.setdefault(key, {})[int(entry["tile_size"])] = int(entry["shared"])
    return needs


# mode -> (the clamp's forced limit or None, Triton's lowering: None = the GPU's own, "sm75" = Turing's
# on this GPU, TRITON_OVERRIDE_ARCH: a proxy of Turing code, its shared memory exactly Turing's)
# The clamp is forced to a Turing GPU's opt-in shared memory; the fit table holds what the
# kernel needs when compiled for sm_75, so the clamped tiles are those a T4 would launch.
MODES = {"clamped": (str(TURING.limit), None), "default": (None, None),
         "clamped-sm75": (str(TURING.limit), "sm75"), "default-sm75": (None, "sm75")}
OVERRIDE_ENV = "TRITON_OVERRIDE_ARCH"


def run_attention(site: Path, table: Path, mode: str, out_dir: Path, timed: bool = False) -> dict:
    """Run every case in a fresh process in `mode` (see MODES); the launches it recorded."""
    limit, lowering = MODES[mode]
    # default: vLLM's own launches (ranked configurations would apply at any limit, the device's too)
    extra = {layout.ENV_SMEM_LIMIT: limit} if limit else {ENV_RANKED: ""}
    env = python_env(site, table, **extra)
    env.pop(OVERRIDE_ENV, None)
    if lowering:
        env[OVERRIDE_ENV] = lowering
    command = [sys.executable, "-m", "tooling.unified_attention_run", "--out", str(out_dir)]
    done = subprocess.run(command + (["--time"] if timed else []), cwd=REPO,
                          env=env, capture_output=True, text=True)
    if done.returncode:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise Problem(f"unified_attention ({mode}) exited {done.returncode}:\n{tail}")
    return json.loads((out_dir / "launches.json").read_text())
