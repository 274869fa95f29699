"""The Mamba/SSM probe (the hybrids' Mamba-2 mixers): `python3 -m tooling.probes.ssm --help`."""
