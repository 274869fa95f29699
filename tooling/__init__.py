"""Host-side tooling shared by bench/ and the tests: vLLM release files, the clamp's apply/check
cycle over releases, the GPU tier's clamped vLLM site, attention runs and clamp benchmark
(clamp_gpu), the kernel probes (probes/), and the serving tier's stack and warm start. Not shipped
in the image; device limits come from contract/devices.py."""
