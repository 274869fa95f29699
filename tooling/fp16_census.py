"""An fp16 census of Gemma 4's multimodal path: each encoder and projector run in fp16 and in fp32 on the
GPU at hand, at the published shapes, with weights and inputs shaped to the published magnitudes.

  bench/fp16_census prepare [--python-version 3.12]     here: stage what must travel, print the device call
  bench/fp16_census run [--out DIR] [--device cuda]     there: every row, a markdown table, DIR/fp16-census.json

Rows (issue 61, item 3):
- the vision tower, pooler and standardisation of the 26B-A4B and the 31B, then `embed_vision`, in the
  order vLLM 0.33.0's `Gemma4ForConditionalGeneration._process_image_input` calls them (gemma4_mm.py):
  `patch_embedder` -> `.to(model dtype)` -> `encoder` -> `pooler` (fp32 out) -> `(x - std_bias) * std_scale`
  -> `.to(model dtype)` -> `embed_vision`;
- the 12B's encoder-free vision embedder (`Gemma4UnifiedVisionEmbedder`, gemma4_unified.py), then
  `embed_vision`, as `_embed_vision_patches` calls them; and transformers' own unified embedder;
- the audio towers of the E2B and E4B (`Gemma4AudioModel`), then `embed_audio`, as `_process_audio_input`;
  the 12B's encoder-free audio path (`embed_audio` on raw 640-sample frames).

Modules: transformers' Gemma 4 modules at the image's version (contract/locks: the vLLM lock's
transformers), built from its config classes; vLLM's classes from the pinned release's package when
they import, else the class lifted by syntax tree from that release's file (the output says which).

Magnitudes (random weights miss magnitude bugs; every row says how it was shaped):
- vision tower: weights at transformers' initialisation, then the residual stream scaled so the pooler's
  input peaks at POOLER_INPUT_PEAK (2,330: a 26B fp16 run's measured pooler input, which the pooler's
  sqrt(1152) takes to about 79,000): the patch embedder's projection and position table and every
  layer's post-attention and post-feed-forward RMSNorm scales times one factor k. The pre-norms make
  each layer's work scale-free, so the stream scales by k exactly; k is measured in fp32 first.
  std_bias: the pooled features' per-channel mean, scaled down where needed to peak at STD_BIAS_PEAK
  (5.4e4); std_scale: 1 / max(per-channel std, 1).
- 12B vision embedder: transformers' initialisation plus, in the first ALIGNED_ROWS rows of
  `patch_dense`, a component along the checkerboard patch's sign pattern sized so those outputs reach a
  target T in fp32: T = 0.5 x 65,504 (in range) and T = 1.5 x 65,504 (past it, as vLLM issue 48231
  reports the real weights reach on a plain red image; the real weights' peak is not published).
- audio towers: no published magnitudes. Weights at initialisation (clip bounds +-inf), and a stressed
  row with the last layer's output RMSNorm scale raised so the tower's last hidden state peaks at
  POOLER_INPUT_PEAK. Input: the real Gemma4AudioFeatureExtractor's log-mel of 30 s of a full-scale
  square wave broken by silences.
- images: full-range checkerboards (values 0 and 1), 8-pixel squares on one half, 1-pixel on the other.

Per row: the largest |activation| over every submodule's output (forward hooks) in fp32 and in fp16
against 65,504, the first submodule whose fp16 output is not finite, whether the output is finite, and
the output's max abs and max rel error (max |fp16 - fp32| / max |fp32|) against fp32.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
STAGE = Path(".cache/fp16-census")
WHEELS = STAGE / "wheels"
WORK = Path("/tmp/vllm-turing-fp16-census")
FP16_MAX = 65504.0
POOLER_INPUT_PEAK = 2330.0  # a 26B-A4B fp16 run's pooler input peak (DESIGN.md 2026-12-06: "about 2,300")
STD_BIAS_PEAK = 5.4e4  # the 26B-A4B / 31B std_bias peak (DESIGN.md 2026-12-06)
TARGET_IN_RANGE, TARGET_PAST_RANGE = 0.5 * FP16_MAX, 1.5 * FP16_MAX
ALIGNED_ROWS = 16
SOFT_TOKENS = 280  # Gemma 4's default image budget: 280 soft tokens of 3 x 3 patches
AUDIO_SECONDS = 30  # Gemma 4's longest audio input
TINY_AUDIO_SECONDS = 0.5
# hidden_size of each published checkpoint's text config (the embedders project into it)
TEXT_HIDDEN = {"E2B": 1536, "E4B": 2560, "12B": 3840, "26B-A4B": 2816, "31B": 5376}
VLLM_MODELS = "vllm/model_executor/models"


def transformers_version() -> str:
    """The image's transformers: the pinned vLLM's lock (contract/locks/vllm-<version>.txt)."""
    from buildtool.lock import base_target, parse_lock
    from tooling.vllm_releases import PINNED

    lock = base_target(PINNED).path
    found = [p.version for p in parse_lock(lock.read_text(), str(lock)) if p.name == "transformers"]
    if len(found) != 1:
        raise SystemExit(f"fp16_census: {lock} pins transformers {len(found)} times, expected once")
    return found[0]


# ---- staging (here) and the device's environment (there) ----

def prepare(python_version: str) -> dict:
    """Stage the vLLM package and a wheelhouse of the image's transformers with its dependencies for
    `python_version` (the device's Python) under .cache/fp16-census/; the device call. The stage is
    written beside the old one and swapped in once complete: a failed download keeps the old stage."""
    from tooling.vllm_releases import PINNED, package_tarball

    stage = REPO / STAGE
    fresh = stage.with_name(stage.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    (fresh / WHEELS.name).mkdir(parents=True)
    shutil.copyfile(package_tarball(PINNED), fresh / f"vllm-{PINNED}-python.tar.gz")
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(fresh / WHEELS.name),
                           "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
                           "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
                           f"transformers=={transformers_version()}"])
    if done.returncode:
        shutil.rmtree(fresh, ignore_errors=True)
        raise SystemExit(f"fp16_census: pip download of transformers for Python {python_version} exited "
                         f"{done.returncode} (its output above); {STAGE} is left as it was")
    (fresh / "versions.json").write_text(json.dumps({"python": python_version, "transformers": transformers_version()}))
    shutil.rmtree(stage, ignore_errors=True)
    fresh.rename(stage)
    size = sum(p.stat().st_size for p in stage.rglob("*") if p.is_file())
    return {"command": "PYTHONUNBUFFERED=1 python3 bench/fp16_census run", "carry": [str(STAGE)],
            "timeout_s": 600, "staged_mib": round(size / 2**20, 1)}


def device_environment() -> dict:
    """Unpack the staged wheels (once) ahead of the machine's own packages, and the vLLM package beside
    them; {"deps": path, "vllm_site": path}. Exits 2 with one line when the stage is missing or was made
    for another Python."""
    stage = REPO / STAGE
    versions = stage / "versions.json"
    if not versions.is_file():
        raise SystemExit(f"fp16_census: {STAGE} is missing; run `bench/fp16_census prepare` here and carry {STAGE}")
    staged = json.loads(versions.read_text())
    wanted, here = staged["python"], f"{sys.version_info.major}.{sys.version_info.minor}"
    if wanted != here:
        raise SystemExit(f"fp16_census: {STAGE} holds wheels for Python {wanted}, this is {here}; run "
                         f"`bench/fp16_census prepare --python-version {here}` and carry {STAGE} again")
    deps, site = WORK / f"deps-{here}", WORK / "vllm-site"
    if not (deps / ".complete").is_file():
        shutil.rmtree(deps, ignore_errors=True)
        for wheel in sorted((REPO / WHEELS).glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(deps)
        (deps / ".complete").write_text("")
    if not (site / ".complete").is_file():
        shutil.rmtree(site, ignore_errors=True)
        (tarball,) = stage.glob("vllm-*-python.tar.gz")
        with tarfile.open(tarball) as tar:
            tar.extractall(site, filter="data")
        (site / ".complete").write_text("")
    sys.path.insert(0, str(deps))
    return {"deps": deps, "vllm_site": site, "transformers": staged["transformers"]}


# ---- vLLM's classes: imported where they import, else lifted from the release's file ----

LIFT_IMPORT_PROBE = "import vllm.model_executor.models.gemma4_unified"
IMPORT_PROBE_S = 120


def vllm_importable(site: Path, deps: Path | None) -> str | None:
    """None when vLLM's Gemma 4 model files import in a child process, else the last line of its error."""
    path = os.pathsep.join(str(p) for p in (site, deps) if p)
    try:
        done = subprocess.run([sys.executable, "-c", LIFT_IMPORT_PROBE], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=path), timeout=IMPORT_PROBE_S)
    except subprocess.TimeoutExpired:
        return f"the import did not finish within {IMPORT_PROBE_S} s"
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["no output"])[-1]


class ColumnParallelLinearStandin:
    """What vLLM's ColumnParallelLinear is at tensor parallel 1, unquantized, gather_output=True:
    `F.linear(x, weight, bias)` returned as (output, None) (UnquantizedLinearMethod.apply)."""

    def __new__(cls, input_size, output_size, bias=True, **_):
        import torch

        class Linear(torch.nn.Linear):
            def forward(self, x):
                return super().forward(x), None

        return Linear(input_size, output_size, bias=bias)


def lift_class(source: str, name: str, namespace: dict):
    """The class `name` of a module's source, executed alone in `namespace` (its imports there)."""
    tree = ast.parse(source)
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    exec(compile(ast.Module(body=[node], type_ignores=[]), f"<lifted {name}>", "exec"), namespace)
    return namespace[name]


def unified_embedder_class(site: Path, import_error: str | None):
    """(vLLM's Gemma4UnifiedVisionEmbedder class, how it was had)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    why = f"import: {import_error}"
    if import_error is None:
        sys.path.insert(0, str(site))
        from vllm.model_executor.models.gemma4_unified import Gemma4UnifiedVisionEmbedder

        try:  # its ColumnParallelLinear asks vLLM's tensor-parallel group, which only an engine sets up
            Gemma4UnifiedVisionEmbedder(probe_config())
            return Gemma4UnifiedVisionEmbedder, "vLLM's class, imported"
        except Exception as error:  # noqa: BLE001 - any failure to build it outside an engine is reported
            why = f"imported, not built outside an engine: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
    source = (site / VLLM_MODELS / "gemma4_unified.py").read_text()
    lifted = lift_class(source, "Gemma4UnifiedVisionEmbedder",
                        {"torch": torch, "nn": nn, "F": F, "ColumnParallelLinear": ColumnParallelLinearStandin})
    return lifted, f"vLLM's class lifted from gemma4_unified.py (ColumnParallelLinear: tp-1 standin); {why}"


def probe_config():
    """A tiny unified vision config (what a trial construction needs)."""
    import transformers

    return transformers.Gemma4UnifiedVisionConfig(mm_embed_dim=8, mm_posemb_size=4, patch_size=1)


# ---- the census ----

@dataclasses.dataclass
class Peaks:
    """Per submodule (its name under the row's prefix): the largest finite |value| of its outputs, the
    dtypes they had, and the first submodule (in call order) whose output was not finite."""
    peak: dict = dataclasses.field(default_factory=dict)
    dtypes: dict = dataclasses.field(default_factory=dict)
    first_nonfinite: str = ""

    def see_all(self, name: str, output) -> None:
        """A forward hook's body: returns None, so the module's output stands."""
        for tensor in tensors_of(output):
            self.see(name, tensor)

    def see(self, name: str, tensor) -> None:
        import torch

        if not (isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.numel()):
            return
        finite = torch.isfinite(tensor)
        if not self.first_nonfinite and not bool(finite.all()):
            self.first_nonfinite = name
        value = float(tensor.detach().abs().masked_fill(~finite, 0).max())
        self.peak[name] = max(self.peak.get(name, 0.0), value)
        self.dtypes.setdefault(name, set()).add(str(tensor.dtype).removeprefix("torch."))

    def largest(self, names=None) -> tuple[float, str]:
        """(peak, where) over `names` (default all)."""
        chosen = [n for n in self.peak if names is None or n in names]
        if not chosen:
            return 0.0, ""
        name = max(chosen, key=self.peak.get)
        return self.peak[name], name


def tensors_of(value):
    """Every tensor in a module's output (tensors, tuples, lists, dicts, transformers' ModelOutputs)."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_of(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors_of(item)


def watched(modules: dict, run: Callable):
    """(run()'s output, Peaks over every submodule's output of each named module)."""
    peaks, handles = Peaks(), []
    for prefix, module in modules.items():
        for name, sub in module.named_modules():
            label = f"{prefix}.{name}" if name else prefix
            handles.append(sub.register_forward_hook(lambda _m, _i, out, label=label: peaks.see_all(label, out)))
    try:
        import torch

        with torch.no_grad():
            output = run()
    finally:
        for handle in handles:
            handle.remove()
    return output, peaks


@dataclasses.dataclass
class Case:
    name: str
    models: str
    source: str
    shaping: str
    build: Callable  # (dtype) -> ({prefix: module}, run: () -> output tensor)


@dataclasses.dataclass
class Row:
    name: str
    models: str
    source: str
    shaping: str
    need: float  # the fp32 run's peak over the submodules whose output the fp16 run holds in fp16
    need_at: str
    fp16_peak: float  # the fp16 run's largest finite |value| held in fp16
    fp16_peak_at: str
    fp16_first_nonfinite: str
    kept_fp32: str  # submodules the code runs in fp32 under fp16 whose fp32 peak passes 65,504
    output_finite: bool
    max_abs_error: float | None
    max_rel_error: float | None
    seconds: float

    def verdict(self) -> str:
        if not self.output_finite:
            return "NOT FINITE"
        return "past 65,504" if self.need > FP16_MAX else "in range"


def row_of(case: Case, p32: Peaks, p16: Peaks, finite: bool, abs_error, rel_error, seconds: float) -> Row:
    in_half = {name for name, dtypes in p16.dtypes.items() if "float16" in dtypes}
    need, need_at = p32.largest(in_half)
    fp16_peak, fp16_peak_at = p16.largest(in_half)
    kept = sorted((name for name in p32.peak if name not in in_half and p32.peak[name] > FP16_MAX),
                  key=p32.peak.get, reverse=True)
    kept_fp32 = ", ".join(f"{name} {p32.peak[name]:,.0f}" for name in kept[:3])
    return Row(case.name, case.models, case.source, case.shaping, need, need_at, fp16_peak, fp16_peak_at,
               p16.first_nonfinite, kept_fp32, finite, abs_error, rel_error, seconds)


def errors(out16, out32) -> tuple[bool, float | None, float | None]:
    import torch

    out16, out32 = out16.float(), out32.float()
    finite = bool(torch.isfinite(out16).all())
    if not finite:
        return False, None, None
    diff = float((out16 - out32).abs().max())
    scale = float(out32.abs().max())
    return True, diff, diff / scale if scale else None


def measure(case: Case, device: str) -> Row:
    import torch

    started = time.perf_counter()
    runs = {}
    for dtype in (torch.float32, torch.float16):
        modules, run = case.build(dtype)
        output, peaks = watched(modules, run)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        runs[dtype] = (output.detach(), peaks)
        del modules, run
    (out32, p32), (out16, p16) = runs[torch.float32], runs[torch.float16]
    finite, abs_error, rel_error = errors(out16, out32)
    return row_of(case, p32, p16, finite, abs_error, rel_error, time.perf_counter() - started)


# ---- inputs ----

def checkerboard_image(height: int, width: int):
    """A full-range RGB image in [0, 1], (3, H, W): 8-pixel squares on the left half, 1-pixel on the right,
    the colours inverted on the bottom half."""
    import torch

    y, x = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    coarse, fine = ((x // 8 + y // 8) % 2), ((x + y) % 2)
    board = torch.where(x < width // 2, coarse, fine).float()
    board = torch.where(y < height // 2, board, 1 - board)
    return board.expand(3, height, width).clone()


def patches(image, patch: int):
    """(pixel_values (N, patch*patch*3): row-major patches, each (row, column, channel); positions (N, 2) as (x, y))."""
    import torch

    channels, height, width = image.shape
    rows, cols = height // patch, width // patch
    grid = image.reshape(channels, rows, patch, cols, patch).permute(1, 3, 2, 4, 0)
    values = grid.reshape(rows * cols, patch * patch * channels)
    y, x = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    return values, torch.stack([x.reshape(-1), y.reshape(-1)], dim=-1)


def square_wave_with_silences(seconds: float, rate: int = 16_000):
    """Full-scale (+-1) 440 Hz square wave, silent for 0.5 s of every 2 s."""
    import torch

    t = torch.arange(int(seconds * rate)) / rate
    wave = torch.sign(torch.sin(2 * torch.pi * 440 * t))
    return torch.where((t % 2.0) < 1.5, wave, torch.zeros_like(wave))


# ---- module builders (fp32 weights shaped once, then cast) ----

def modeling():
    """transformers' Gemma 4 modeling module (its multimodal classes are not exported at the top)."""
    from transformers.models.gemma4 import modeling_gemma4

    return modeling_gemma4


def seeded(seed: int):
    import torch

    torch.manual_seed(seed)


def large_vision(variant: str, device: str, tiny: bool = False) -> Case:
    """The 26B-A4B / 31B vision path (tower, pooler, standardisation, embed_vision)."""
    import torch
    import transformers
    from tooling.gemma4_towers import TOWERS

    fields = dict(TOWERS["gemma4-26b-a4b" if variant == "26B-A4B" else "gemma4-31b"]["vision"], standardize=True)
    text_hidden = TEXT_HIDDEN[variant]
    if tiny:
        fields.update(hidden_size=64, num_attention_heads=2, head_dim=32, intermediate_size=128, num_hidden_layers=2)
        text_hidden = 96
    fields["num_key_value_heads"] = fields["num_attention_heads"]  # the class default (12) divides no 16 heads
    vision_config = transformers.Gemma4VisionConfig(**fields)
    text_config = transformers.Gemma4TextConfig(hidden_size=text_hidden)
    k = vision_config.pooling_kernel_size
    tokens = 12 if tiny else SOFT_TOKENS  # 280 = 14 x 20 pooled tokens
    rows, cols = (3 * k, 4 * k) if tiny else (14 * k, 20 * k)
    image = checkerboard_image(rows * vision_config.patch_size, cols * vision_config.patch_size)
    values, positions = patches(image, vision_config.patch_size)
    assert values.shape[0] == tokens * k * k
    seeded(0)
    with torch.device(device):
        tower = modeling().Gemma4VisionModel(vision_config).float().eval()
        embedder = modeling().Gemma4MultimodalEmbedder(vision_config, text_config).float().eval()
    pv, pp = values[None].to(device), positions[None].to(device)
    pad = (pp == -1).all(dim=-1)

    def tower_output(model, dtype):
        embeds = model.patch_embedder(pv, pp, pad).to(dtype)
        return model.encoder(inputs_embeds=embeds, attention_mask=~pad, pixel_position_ids=pp).last_hidden_state

    with torch.no_grad():
        factor = POOLER_INPUT_PEAK / float(tower_output(tower, torch.float32).abs().max())
        tower.patch_embedder.input_proj.weight.mul_(factor)
        tower.patch_embedder.position_embedding_table.mul_(factor)
        for layer in tower.encoder.layers:
            layer.post_attention_layernorm.weight.mul_(factor)
            layer.post_feedforward_layernorm.weight.mul_(factor)
        hidden = tower_output(tower, torch.float32)
        pooled, mask = tower.pooler(hidden_states=hidden, pixel_position_ids=pp, padding_positions=pad,
                                    output_length=hidden.shape[1] // (k * k))
        pooled = pooled[mask]
        mean, std = pooled.mean(dim=0), pooled.std(dim=0)
        tower.std_bias.copy_(mean * min(1.0, STD_BIAS_PEAK / float(mean.abs().max())))
        tower.std_scale.copy_(1.0 / std.clamp(min=1.0))
    shaping = (f"residual stream x{factor:.4g}: pooler input peak {float(hidden.abs().max()):,.0f}, pooled x sqrt("
               f"{vision_config.hidden_size}) peak {float(pooled.abs().max()):,.0f}; std_bias peak "
               f"{float(tower.std_bias.abs().max()):,.0f}; {tokens} soft tokens of a full-range checkerboard")

    def build(dtype):
        model, proj = tower.to(dtype), embedder.to(dtype)

        def run():  # vLLM 0.33.0 gemma4_mm.py _process_image_input, one image
            hidden_states = tower_output(model, dtype)
            pooled_states, valid = model.pooler(hidden_states=hidden_states, pixel_position_ids=pp,
                                                padding_positions=pad, output_length=hidden_states.shape[1] // (k * k))
            valid_states = pooled_states[0][valid[0]]
            valid_states = (valid_states - model.std_bias) * model.std_scale
            return proj(inputs_embeds=valid_states.to(dtype).unsqueeze(0)).squeeze(0)

        return {"vision_tower": model, "embed_vision": proj}, run

    return Case(f"vision tower + pooler + standardisation + embed_vision ({variant})", variant,
                f"transformers {transformers.__version__} Gemma4VisionModel, Gemma4MultimodalEmbedder; "
                "vLLM's call order", shaping, build)


def aligned_dense(dense_weight, dense_bias, pattern, target: float) -> None:
    """Add to the first ALIGNED_ROWS rows of a (out, in) weight a component along `pattern` (the LayerNorm
    output of the checkerboard patch, entries +-1) so that those outputs reach `target`."""
    import torch

    with torch.no_grad():
        rows = min(ALIGNED_ROWS, dense_weight.shape[0])
        current = dense_weight[:rows] @ pattern + (dense_bias[:rows] if dense_bias is not None else 0)
        dense_weight[:rows] += ((target - current) / float(pattern @ pattern))[:, None] * pattern[None, :]


def unified_vision(target: float, site: Path, import_error: str | None, device: str, real_vllm: bool,
                   tiny: bool = False) -> Case:
    """The 12B's encoder-free vision embedder then embed_vision: vLLM's class (real_vllm) or transformers'."""
    import torch
    import transformers

    vision_config = transformers.Gemma4UnifiedVisionConfig(**({"mm_embed_dim": 64, "mm_posemb_size": 16,
                                                                 "output_proj_dims": 64, "patch_size": 4}
                                                                if tiny else {}))
    text_config = transformers.Gemma4UnifiedTextConfig(hidden_size=96 if tiny else TEXT_HIDDEN["12B"])
    patch = vision_config.model_patch_size
    tokens_x, tokens_y = (4, 3) if tiny else (20, 14)
    values, positions = patches(checkerboard_image(tokens_y * patch, tokens_x * patch), patch)
    seeded(1)
    from transformers.models.gemma4_unified import modeling_gemma4_unified as unified

    with torch.device(device):
        if real_vllm:
            cls, source = unified_embedder_class(site, import_error)
            embedder = cls(vision_config).float().eval()
            torch.nn.init.normal_(embedder.patch_dense.weight, std=vision_config.initializer_range)
            torch.nn.init.zeros_(embedder.patch_dense.bias)
            torch.nn.init.normal_(embedder.pos_embedding, std=vision_config.initializer_range)
            project = unified.Gemma4UnifiedMultimodalEmbedder(vision_config, text_config).float().eval()
            source += f"; embed_vision: transformers {transformers.__version__} Gemma4UnifiedMultimodalEmbedder"
        else:
            embedder = unified.Gemma4UnifiedVisionEmbedder(vision_config, text_config).float().eval()
            torch.nn.init.normal_(embedder.patch_dense.weight, std=vision_config.initializer_range)
            torch.nn.init.zeros_(embedder.patch_dense.bias)
            torch.nn.init.normal_(embedder.pos_embedding, std=vision_config.initializer_range)
            project, source = None, f"transformers {transformers.__version__} Gemma4UnifiedVisionEmbedder (its own RMSNorm + Linear)"
    pv, pp = values.to(device), positions.to(device)
    with torch.no_grad():
        pattern = embedder.patch_ln1(pv[:1].float())[0]  # the coarse-checkerboard patch after LN1
        aligned_dense(embedder.patch_dense.weight, embedder.patch_dense.bias, pattern, target)
    shaping = (f"patch_dense N(0, {vision_config.initializer_range}) plus, in its first {ALIGNED_ROWS} rows, the "
               f"checkerboard patch's pattern sized to reach {target:,.0f} in fp32; {values.shape[0]} patches of "
               f"{patch}x{patch}x3 = {values.shape[1]}")

    def build(dtype):
        model = embedder.to(dtype)
        if project is not None:
            proj = project.to(dtype)

            def run():  # vLLM 0.33.0 gemma4_unified.py _embed_vision_patches
                return proj(model(pv, pp).to(dtype))

            return {"vision_embedder": model, "embed_vision": proj}, run
        return {"vision_embedder": model}, lambda: model(pv[None], pp[None]).pooler_output[0]

    return Case(f"unified vision embedder + embed_vision (12B, {'vLLM' if real_vllm else 'transformers'} class), "
                f"patch_dense target {target / FP16_MAX:.1f} x 65,504", "12B",
                source, shaping, build)


def audio_tower(variant: str, stressed: bool, device: str, tiny: bool = False) -> Case:
    """The E2B / E4B audio tower then embed_audio, as _process_audio_input."""
    import numpy
    import torch
    import transformers
    from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor

    fields = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, output_proj_dims=48) if tiny else {}
    audio_config = transformers.Gemma4AudioConfig(**fields)
    text_config = transformers.Gemma4TextConfig(hidden_size=96 if tiny else TEXT_HIDDEN[variant])
    extractor = Gemma4AudioFeatureExtractor()
    seconds = TINY_AUDIO_SECONDS if tiny else AUDIO_SECONDS
    wave = square_wave_with_silences(seconds).numpy().astype(numpy.float32)
    features = extractor([wave], sampling_rate=16_000, return_tensors="pt")
    features_in = features["input_features"].to(device)
    mask = features["input_features_mask"].to(device)
    seeded(2)
    with torch.device(device):
        tower = modeling().Gemma4AudioModel(audio_config).float().eval()
        embedder = modeling().Gemma4MultimodalEmbedder(audio_config, text_config).float().eval()
    shaping = (f"initialisation (normal {audio_config.initializer_range}, norms 1, clip bounds +-inf); "
               f"{features_in.shape[1]} log-mel frames of {seconds} s full-scale square wave")
    if stressed:
        with torch.no_grad():
            norm_out = {}
            hook = tower.layers[-1].norm_out.register_forward_hook(lambda _m, _i, out: norm_out.setdefault("x", out))
            tower(features_in, mask)
            hook.remove()
            factor = POOLER_INPUT_PEAK / float(norm_out["x"].abs().max())
            tower.layers[-1].norm_out.weight.mul_(factor)
        shaping += f"; last layer's norm_out scale x{factor:.4g}: its output peaks at {POOLER_INPUT_PEAK:,.0f}"

    def build(dtype):
        model, proj = tower.to(dtype), embedder.to(dtype)

        def run():  # vLLM 0.33.0 gemma4_mm.py _process_audio_input
            encodings = model(features_in.to(dtype), mask).last_hidden_state
            return proj(inputs_embeds=encodings)

        return {"audio_tower": model, "embed_audio": proj}, run

    return Case(f"audio tower + embed_audio ({variant}){', stressed' if stressed else ''}", variant,
                f"transformers {transformers.__version__} Gemma4AudioModel, Gemma4AudioFeatureExtractor, "
                "Gemma4MultimodalEmbedder; vLLM's call order", shaping, build)


def unified_audio(device: str, tiny: bool = False) -> Case:
    """The 12B's encoder-free audio path: embed_audio on raw frames of 640 samples."""
    import torch
    import transformers

    audio_config = transformers.Gemma4UnifiedAudioConfig(**({"audio_embed_dim": 40} if tiny else {}))
    text_config = transformers.Gemma4UnifiedTextConfig(hidden_size=96 if tiny else TEXT_HIDDEN["12B"])
    wave = square_wave_with_silences(TINY_AUDIO_SECONDS if tiny else AUDIO_SECONDS)
    frames = wave[: len(wave) // audio_config.audio_embed_dim * audio_config.audio_embed_dim]
    frames = frames.reshape(-1, audio_config.audio_embed_dim).to(device)
    seeded(3)
    from transformers.models.gemma4_unified import modeling_gemma4_unified as unified

    with torch.device(device):
        embedder = unified.Gemma4UnifiedMultimodalEmbedder(audio_config, text_config).float().eval()

    def build(dtype):
        proj = embedder.to(dtype)
        return {"embed_audio": proj}, lambda: proj(inputs_embeds=frames.to(dtype)[None])[0]

    return Case("embed_audio on raw frames (12B)", "12B",
                f"transformers {transformers.__version__} Gemma4UnifiedMultimodalEmbedder; "
                "vLLM's call order (gemma4_unified.py _process_audio_input)",
                f"initialisation; {frames.shape[0]} frames of {audio_config.audio_embed_dim} samples, full-scale "
                "square wave with silences", build)


def cases(site: Path, import_error: str | None, device: str, tiny: bool = False) -> list[Callable[[], Case]]:
    """The census's rows, each built when it runs (one model in memory at a time)."""
    return [
        lambda: large_vision("26B-A4B", device, tiny),
        lambda: large_vision("31B", device, tiny),
        lambda: unified_vision(TARGET_IN_RANGE, site, import_error, device, True, tiny),
        lambda: unified_vision(TARGET_PAST_RANGE, site, import_error, device, True, tiny),
        lambda: unified_vision(TARGET_PAST_RANGE, site, import_error, device, False, tiny),
        lambda: audio_tower("E2B", False, device, tiny),
        lambda: audio_tower("E2B", True, device, tiny),
        lambda: audio_tower("E4B", True, device, tiny),
        lambda: unified_audio(device, tiny),
    ]


# ---- output ----

def table(rows: list[Row]) -> str:
    def figure(value):
        return "-" if value is None else f"{value:.3g}"

    lines = ["| row | largest \\|activation\\| of the fp16 layers, in fp32 (where) | / 65,504 | fp16 run: largest "
             "finite fp16 value (where) | first non-finite | output in fp16 | max abs err | max rel err | held in "
             "fp32 by the code, past 65,504 |",
             "| --- | --- | ---: | --- | --- | --- | ---: | ---: | --- |"]
    for row in rows:
        lines.append(f"| {row.name} | {row.need:,.0f} ({row.need_at}) | {row.need / FP16_MAX:.2f} | "
                     f"{row.fp16_peak:,.0f} ({row.fp16_peak_at}) | {row.fp16_first_nonfinite or 'none'} | "
                     f"{'finite' if row.output_finite else 'NOT FINITE'} | {figure(row.max_abs_error)} | "
                     f"{figure(row.max_rel_error)} | {row.kept_fp32 or '-'} |")
    return "\n".join(lines)


def census(site: Path, import_error: str | None, device: str, tiny: bool = False) -> list[Row]:
    rows = []
    for make in cases(site, import_error, device, tiny):
        case = make()
        rows.append(measure(case, device))
        print(f"[fp16_census] {rows[-1].name}: {rows[-1].verdict()} in {rows[-1].seconds:.1f} s", flush=True)
        if device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()
    return rows


def run(out: Path | None, device: str, tiny: bool = False) -> int:
    env = device_environment()
    import torch
    import transformers

    if transformers.__version__ != env["transformers"]:
        print(f"fp16_census: transformers {transformers.__version__} imported from {transformers.__file__}, "
              f"expected {env['transformers']} from {env['deps']}", file=sys.stderr)
        return 2
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("fp16_census: no CUDA device; run it on the GPU machine (or --device cpu for a try)", file=sys.stderr)
        return 2
    import_error = vllm_importable(env["vllm_site"], env["deps"])
    print(f"[fp16_census] torch {torch.__version__}, transformers {transformers.__version__}, device "
          f"{torch.cuda.get_device_name(0) if device.startswith('cuda') else device}", flush=True)
    print(f"[fp16_census] vLLM's Gemma 4 files {'import' if import_error is None else 'do not import: ' + import_error}",
          flush=True)
    rows = census(env["vllm_site"], import_error, device, tiny)
    print(table(rows))
    print()
    for row in rows:
        print(f"- {row.name}: {row.source}. Shaping: {row.shaping}.")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        report = {"torch": torch.__version__, "transformers": transformers.__version__,
                  "device": torch.cuda.get_device_name(0) if device.startswith("cuda") else device,
                  "vllm_import": import_error or "imported", "fp16_max": FP16_MAX,
                  "rows": [dataclasses.asdict(row) for row in rows]}
        (out / "fp16-census.json").write_text(json.dumps(report, indent=2))
        (out / "fp16-census.md").write_text(table(rows) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/fp16_census", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    here = sub.add_parser("prepare", help="stage the wheels and the vLLM package here, print the device call")
    here.add_argument("--python-version", default="3.12", help="the device's Python (default 3.12)")
    there = sub.add_parser("run", help="run the census on the GPU machine")
    there.add_argument("--out", type=Path, help="folder for fp16-census.json (default $OUT)")
    there.add_argument("--device", default="cuda")
    there.add_argument("--tiny", action="store_true", help="tiny shapes, a try of the builders (not the census)")
    args = parser.parse_args(argv)
    if args.action == "prepare":
        print(json.dumps(prepare(args.python_version), indent=2))
        return 0
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    return run(out, args.device, args.tiny)


if __name__ == "__main__":
    raise SystemExit(main())
