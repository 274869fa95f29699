"""Pinned versions. The Dockerfiles' ARG defaults must agree with these; a unit test reads them."""

VLLM_VERSION = "0.33.0"
OFFICIAL_BASE_IMAGE = f"vllm/vllm-openai:v{VLLM_VERSION}"
PYPI_BASE_TAG = f"vllm-turing-base:{VLLM_VERSION}"
IMAGE_TAG = f"vllm-turing:{VLLM_VERSION}"
# The Kubernetes API the rendered manifests are validated against (kubectl 1.32 on the test machines).
KUBERNETES_VERSION = "1.32.0"
