"""Image labels computed from what the build proved (pure)."""

OCI = "org.opencontainers.image."
OURS = "io.vllm-turing."
VLLM_VERSION_LABEL = OURS + "vllm.version"


def image_labels(*, reports: dict, base_ref: str, base_digest: str, revision: str, created: str) -> dict:
    """`reports` holds the JSON reports the build left in the image, by their keys in
    contract.layout.BUILD_REPORTS (see read_build_reports)."""
    versions = reports["versions"]
    clamp = reports["clamp"]
    fit = reports["fit"]
    fit_sm86 = reports["fit_sm86"]
    return {
        OCI + "title": "vllm-turing",
        OCI + "version": versions["vllm"],
        OCI + "created": created,
        OCI + "revision": revision,
        OCI + "base.name": base_ref,
        OCI + "base.digest": base_digest,
        VLLM_VERSION_LABEL: versions["vllm"],
        OURS + "torch.version": versions["torch"],
        OURS + "triton.version": versions["triton"],
        OURS + "clamp.version": str(clamp["patch_version"]),
        OURS + "clamp.sha256": clamp["sha256_after"],
        OURS + "fit.max-shared": str(fit["max_shared"]),
        OURS + "fit.limit": str(fit["device"]["limit"]),
        OURS + "fit.sm86.max-shared": str(fit_sm86["max_shared"]),
        OURS + "fit.sm86.limit": str(fit_sm86["device"]["limit"]),
        **fp16_labels(reports["fp16"]),
    }


FP16_SHA256_LABEL = OURS + "fp16.sha256"


def fp16_labels(report: dict) -> dict:
    """The fp16 upcast's apply report (patches/fp16_upcast) as labels: its outcome (applied or already;
    none where the release has no gemma4_unified.py), its version, the layers it runs in fp32, and the
    sha256 of the file it left (none where there is no file)."""
    return {
        OURS + "fp16.outcome": str(report["outcome"]),
        OURS + "fp16.version": str(report["patch_version"]),
        OURS + "fp16.layers": "" if report["outcome"] == "none" else ",".join(report.get("layers") or []),
        FP16_SHA256_LABEL: str(report.get("sha256_after") or "none"),
    }


def base_digest(image_attrs: dict) -> str:
    """The registry digest of a pulled base, else its local image ID (a base built here)."""
    digests = image_attrs.get("RepoDigests") or []
    if digests:
        return digests[0].split("@", 1)[1]
    return image_attrs["Id"]
