"""Host-side tooling shared by bench/ and the tests: vLLM release files, the clamp's apply/check
cycle over releases, and the GPU tier's clamped vLLM site and attention runs. Not shipped in the image."""
