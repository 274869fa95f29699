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
    }


def base_digest(image_attrs: dict) -> str:
    """The registry digest of a pulled base, else its local image ID (a base built here)."""
    digests = image_attrs.get("RepoDigests") or []
    if digests:
        return digests[0].split("@", 1)[1]
    return image_attrs["Id"]
