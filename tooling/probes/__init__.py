"""Kernel probes: every Triton launch of a mixer family recorded by the fit check's recorder and
cross-compiled by the image's Triton, every autotune configuration included. One folder per probe
(gdn/, ssm/): `probe` runs in a container of the image and prints JSON lines, `verdicts` judges them,
`python3 -m tooling.probes.NAME` is the command (bench/gdn_kernels_smem, bench/ssm_kernels_smem)."""
