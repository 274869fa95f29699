"""The device table: every NVIDIA device limit the project decides by, in one place. The preflight,
the fit check, the clamp's ranking and the host-side tooling (bench/, tooling/, tests) import it."""
from typing import NamedTuple


class DeviceLimits(NamedTuple):
    """A device the fit check can target: compute capability as the fit table writes it (75 for 7.5)
    and the opt-in shared memory per block in bytes, which every kernel launch must fit."""

    cc: int
    limit: int


# By the name `python -m patches.fitcheck --device` takes.
DEVICES = {
    "sm70": DeviceLimits(70, 98_304),  # Volta
    "sm75": DeviceLimits(75, 65_536),  # Turing: T4, RTX 20xx, Quadro RTX
    "sm86": DeviceLimits(86, 101_376),  # Ampere's consumer parts: RTX 30xx, A10
    "sm90": DeviceLimits(90, 232_448),  # Hopper: H100, H200 (the GPU tier's machine)
}

class Card(NamedTuple):
    """A card by its name (what `fetch --gpu` takes besides the DEVICES names): its device in DEVICES
    and its memory in bytes, as NVML reports the card's total."""

    device: str
    memory: int


MiB = 2**20
CARDS = {
    "t4": Card("sm75", 15_360 * MiB),
    "rtx2080": Card("sm75", 8_192 * MiB),
    "rtx2080ti": Card("sm75", 11_264 * MiB),
    "titanrtx": Card("sm75", 24_576 * MiB),
    "quadro-rtx6000": Card("sm75", 24_576 * MiB),
    "quadro-rtx8000": Card("sm75", 49_152 * MiB),
    "v100-16gb": Card("sm70", 16_384 * MiB),
    "v100-32gb": Card("sm70", 32_768 * MiB),
    "rtx3090": Card("sm86", 24_576 * MiB),
    "a10": Card("sm86", 23_028 * MiB),
    "h100": Card("sm90", 81_559 * MiB),
    "h200": Card("sm90", 143_771 * MiB),
}
TURING = DEVICES["sm75"]
AMPERE = DEVICES["sm86"]
HOPPER = DEVICES["sm90"]

# The first capability with bf16 arithmetic (Ampere). Below it vLLM runs a bf16 checkpoint in fp16.
BF16_MIN_CC = (8, 0)
# The first capability with an fp8 datapath (Ada), which an fp8 KV cache needs.
FP8_MIN_CC = (8, 9)


def cc_number(cc: tuple[int, int]) -> int:
    """(8, 6) -> 86, the fit table's and the fit check's way of writing a capability."""
    major, minor = cc
    return major * 10 + minor

# GPU memory fractions (vLLM's gpu_memory_utilization, of a card's total memory). The card's size is
# not known where units are rendered, so servers sharing a card are held to a sum of fractions; what
# it leaves is for what no server counts (the driver's reserve, a display, a CUDA context outside vLLM).
SHARED_CARD_BUDGET = 0.95
VLLM_DEFAULT_UTILIZATION = 0.9  # vLLM 0.33.0's default: what a server takes when the setting is unset
