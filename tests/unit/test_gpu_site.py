"""The GPU tier's site (tooling/gpu_site.py) is the pinned vLLM's Python package with the clamp placed
as the image's build places it: at both sites, so the GPU tier's preflight and encoder tests judge
the clamped launcher (the GPU tier of 2026-12-01 judged an encoder launcher left unclamped)."""
from patches import turing_clamp
from tooling.gpu_site import prepare_site
from tooling.vllm_releases import PINNED, package_tarball


def test_the_site_carries_the_clamp_at_every_site(tmp_path):
    report = prepare_site(package_tarball(PINNED), tmp_path / "site")
    assert report["outcome"] == "applied"
    for site in turing_clamp.SITES.values():
        target = tmp_path / "site" / "vllm" / site.target_in_package
        assert turing_clamp.check(target, site).to_dict()["outcome"] == "present", site.name
