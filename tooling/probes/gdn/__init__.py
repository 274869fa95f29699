"""The gated delta net probe (Qwen3-Next, Qwen3.5): `python3 -m tooling.probes.gdn --help`."""
