"""The fp16 upcast (patches/fp16_upcast) over every release's real gemma4_unified.py (tooling.vllm_releases):
placed where the release has the file and `none` where it has not, idempotent, taken out to the very bytes,
refusing a drifted copy with nothing written; and the patched code computing the same tensors as vLLM's
own under bf16 and fp32 (CPU torch, the class lifted from the release's text at a small patch size)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import patches.fp16_upcast as upcast
from patches.fp16_upcast.placement import (LAYERS, PATCH_VERSION, TARGET_IN_PACKAGE, count_upcast, insert_upcast,
                                           plan, strip_upcast)
from patches.placing import parse
from tooling import vllm_releases
from tests import REPO

MEMBER = vllm_releases.GEMMA4_UNIFIED_MEMBER
# The releases whose wheel has no gemma4_unified.py (the 12B came with 0.23.0)
WITHOUT_FILE = ("0.19.0", "0.19.1", "0.20.0", "0.20.2", "0.21.0", "0.22.1")


def release_copy(version: str, into: Path) -> Path:
    """The release's gemma4_unified.py copied under into/site the way site-packages holds it (with its
    METADATA, so the report names the release); the path even where the release has no such file."""
    site = into / "site"
    (site / "vllm" / TARGET_IN_PACKAGE).parent.mkdir(parents=True)
    shutil.copytree(vllm_releases.site_dir(version) / f"vllm-{version}.dist-info", site / f"vllm-{version}.dist-info")
    target = site / "vllm" / TARGET_IN_PACKAGE
    found = vllm_releases.release_member(version, MEMBER)
    if found is not None:
        shutil.copyfile(found, target)
    return target


def run_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patches.fp16_upcast", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("version", vllm_releases.RELEASES)
def test_each_release_is_patched_once_and_stripped_to_its_bytes_or_has_nothing_to_patch(version, tmp_path):
    target = release_copy(version, tmp_path)
    if version in WITHOUT_FILE:
        assert not target.exists()
        report = upcast.apply(target)
        assert (report.outcome.label, report.vllm_version) == ("none", version)
        assert upcast.check(target).outcome.label == "none" and not target.exists()
        return
    original = target.read_bytes()
    applied = upcast.apply(target)
    assert (applied.outcome.label, applied.vllm_version, applied.patch_version) == ("applied", version, PATCH_VERSION)
    patched = target.read_bytes()
    assert applied.sha256_after != applied.sha256_before and tuple(applied.layers) == LAYERS
    compile(patched, str(target), "exec")
    assert strip_upcast(patched.decode()) == original.decode()
    again = upcast.apply(target)
    assert again.outcome.label == "already" and target.read_bytes() == patched
    assert upcast.check(target).outcome.label == "present"
    count = count_upcast(parse(patched.decode()))
    assert (count.definitions, count.calls, count.version) == (1, 1, PATCH_VERSION)


def test_the_releases_without_the_file_are_those_before_0_23_0():
    lacking = [v for v in vllm_releases.RELEASES if vllm_releases.release_member(v, MEMBER) is None]
    assert tuple(lacking) == WITHOUT_FILE


def test_the_release_table_in_docs_fp16_md_is_the_codes():
    from tooling.fp16_upcast import TABLE_BEGIN, TABLE_END, release_table

    text = (REPO / "docs" / "fp16.md").read_text(encoding="utf-8")
    held = text[text.index(TABLE_BEGIN) + len(TABLE_BEGIN) + 1:text.index(TABLE_END)]
    assert held == release_table(), "regenerate: python3 -m tooling.fp16_upcast --releases --write-doc docs/fp16.md"


def pinned_source() -> str:
    return vllm_releases.release_member(vllm_releases.PINNED, MEMBER).read_text(encoding="utf-8")


DENSE_LINE = "        hidden_states, _ = self.patch_dense(hidden_states)\n"
NORM_LINE = "        hidden_states = self.patch_ln2(hidden_states)\n"


@pytest.mark.parametrize("mutate, says", [
    (lambda s: s.replace(NORM_LINE, "        hidden_states = self.patch_ln2(hidden_states) * 2\n"), "is not `Z = self"),
    (lambda s: s.replace(NORM_LINE, "        hidden_states = hidden_states.float()\n" + NORM_LINE), "is not `Z = self"),
    (lambda s: s.replace(NORM_LINE, NORM_LINE.replace("\n", "; hidden_states = hidden_states\n")),
     "more than one statement"),
    (lambda s: s.replace(DENSE_LINE, DENSE_LINE + DENSE_LINE), "calls self.patch_dense 2 times"),
    (lambda s: s.replace(DENSE_LINE, "        hidden_states = self.patch_dense(hidden_states)[0]\n"),
     "outside a statement"),
    (lambda s: s.replace("class Gemma4UnifiedVisionEmbedder(", "class Gemma4UnifiedPatchEmbedder("),
     "expected one top-level class Gemma4UnifiedVisionEmbedder"),
    (lambda s: s.replace("        return hidden_states\n", "        return hidden_states, _\n", 1), "reads _"),
    (lambda s: insert_upcast(s) + "\n\ndef _vllm_turing_fp16_dense_norm(a, b):\n    return b\n",
     "2 upcast definitions"),
    (lambda s: s + "\ndef broken(:\n", "does not parse"),
])
def test_a_drifted_copy_is_refused_naming_what_is_missing_and_nothing_is_written(tmp_path, mutate, says):
    target = release_copy(vllm_releases.PINNED, tmp_path)
    drifted = mutate(pinned_source())
    assert drifted != pinned_source(), "the mutation applies to the pinned release"
    target.write_text(drifted, encoding="utf-8")
    before = target.stat()
    report = upcast.apply(target)
    assert report.outcome.label == "refused" and says in report.message, report.message
    assert f"(vLLM {vllm_releases.PINNED})" in report.message and "nothing was written" in report.message
    assert target.read_text(encoding="utf-8") == drifted and target.stat().st_mtime_ns == before.st_mtime_ns
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")], "no temporary file left"


def test_the_command_line_exits_by_outcome_and_a_refusal_is_one_line(tmp_path):
    target = release_copy(vllm_releases.PINNED, tmp_path)
    assert run_cli("check", "--target", target).returncode == 1
    shown = run_cli("show", "--target", target)
    assert shown.returncode == 0 and "+        if _vllm_turing_fp16_upcast(self):" in shown.stdout
    applied = run_cli("apply", "--target", target)
    assert applied.returncode == 0 and applied.stdout.startswith("applied: fp16 upcast v")
    assert run_cli("check", "--target", target).returncode == 0 and run_cli("show", "--target", target).stdout == ""
    target.write_text(pinned_source().replace(NORM_LINE, "        hidden_states = 2 * self.patch_ln2(hidden_states)\n"))
    refused = run_cli("apply", "--target", target, "--json")
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1
    assert '"outcome": "refused"' in refused.stdout
    assert run_cli("apply", "--target", tmp_path / "nothing.py").returncode == 0


def test_placement_keeps_vllms_two_lines_as_the_else_branch():
    source = pinned_source()
    placement = plan(source)
    assert (placement.dense_input, placement.norm_output, placement.unit) == ("hidden_states", "hidden_states", "    ")
    patched = insert_upcast(source)
    assert "        else:\n            " + DENSE_LINE.lstrip() + "            " + NORM_LINE.lstrip() in patched


# --- the patched code's numbers (CPU torch) ---

import torch  # noqa: E402  (CPU torch: this host's Python has it, as the image's has)


class SmallConfig:
    """A 4x4x3 patch (48 values) and 32 outputs: the class's own code at a size a CPU test affords."""
    model_patch_size = 4
    mm_embed_dim = 32
    mm_posemb_size = 16


def lifted(version: str):
    from tooling.fp16_upcast import classes

    return classes(vllm_releases.release_member(version, MEMBER).read_text(encoding="utf-8"))


def built(cls, dtype, scale: float = 0.05):
    generator = torch.Generator().manual_seed(3)
    module = cls(SmallConfig())
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)
    return module.to(dtype).eval()


def inputs(patches: int = 6):
    generator = torch.Generator().manual_seed(4)
    pixels = torch.randn(1, patches, 48, generator=generator).sign()
    positions = torch.tensor([[[i % 3, i // 3] for i in range(patches)]])
    return pixels, positions


@pytest.mark.parametrize("version", ["0.23.0", vllm_releases.PINNED])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_under_bf16_and_fp32_the_patched_file_computes_vllms_very_tensor(version, dtype):
    classes = lifted(version)
    pixels, positions = inputs()
    with torch.no_grad():
        unpatched, patched = (built(classes[name], dtype)(pixels, positions) for name in ("unpatched", "patched"))
    assert patched.dtype == dtype and torch.equal(unpatched, patched)


def test_under_fp16_the_overflowing_reduction_runs_in_fp32_and_comes_back_in_fp16():
    classes = lifted(vllm_releases.PINNED)
    pixels, positions = inputs()
    with torch.no_grad():
        modules = {name: built(cls, torch.float16) for name, cls in classes.items()}
        rows = torch.linspace(-2000, 2000, 32)[:, None] * pixels[0, 0]
        for module in modules.values():  # up to 48 products of about +-1 and 2,000: 96,000, past fp16's 65,504
            module.patch_ln1.weight.fill_(1)
            module.patch_ln1.bias.zero_()
            module.patch_dense.weight.copy_(rows.half())
        out = {name: module(pixels, positions) for name, module in modules.items()}
        reference = built(classes["unpatched"], torch.float32)
        reference.load_state_dict({k: v.float() for k, v in modules["unpatched"].state_dict().items()})
        expected = reference(pixels, positions)
    assert torch.isnan(out["unpatched"]).any(), "the unpatched fp16 path overflows here"
    assert out["patched"].dtype == torch.float16 and torch.isfinite(out["patched"]).all()
    assert (out["patched"].float() - expected).abs().max() < 2e-2


def test_a_quantized_patch_dense_keeps_vllms_own_lines():
    from tooling.fp16_upcast import UnquantizedLinearMethod

    classes = lifted(vllm_releases.PINNED)
    module = built(classes["patched"], torch.float16)
    namespace = type(module).forward.__globals__
    assert namespace["_vllm_turing_fp16_upcast"](module)
    module.patch_dense.quant_method = type("Fp8LinearMethod", (), {})()
    assert not namespace["_vllm_turing_fp16_upcast"](module)
    module.patch_dense.quant_method = UnquantizedLinearMethod()
    assert not namespace["_vllm_turing_fp16_upcast"](built(classes["patched"], torch.bfloat16))
