"""Facts about NVIDIA compute capabilities that the preflight and the fit check both decide by."""

# The first capability with bf16 arithmetic (Ampere). Below it vLLM runs a bf16 checkpoint in fp16.
BF16_MIN_CC = (8, 0)


def cc_number(cc: tuple[int, int]) -> int:
    """(8, 6) -> 86, the fit table's and the fit check's way of writing a capability."""
    major, minor = cc
    return major * 10 + minor
