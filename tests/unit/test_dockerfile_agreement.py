"""The Dockerfiles agree with the host side: their ARG defaults with contract/pins.py, the
image's HEALTHCHECK with the units' health check, its default user with the pods' uid."""
import re
from pathlib import Path

from buildtool.units.spec import HEALTH, HEALTH_CMD, POD_GID, POD_HOME, POD_UID
from contract import pins
from tests import REPO



def instructions(dockerfile: Path) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    lines = [line for line in dockerfile.read_text().splitlines() if not line.lstrip().startswith("#")]
    return [" ".join(part.strip() for part in text.split("\\\n")) for text in
            re.split(r"(?<!\\)\n", "\n".join(lines)) if text.strip()]


def arg_defaults(dockerfile: Path) -> dict:
    return dict(re.fullmatch(r"ARG (\w+)=(.*)", text).groups() for text in instructions(dockerfile)
                if text.startswith("ARG ") and "=" in text)


def test_the_dockerfiles_arg_defaults_are_the_pins():
    assert arg_defaults(REPO / "Dockerfile")["BASE_IMAGE"] == pins.OFFICIAL_BASE_IMAGE
    base = arg_defaults(REPO / "base" / "Dockerfile")
    assert (base["OS_IMAGE"], base["VLLM_VERSION"]) == (pins.OS_IMAGE, pins.VLLM_VERSION)


def test_the_images_healthcheck_is_the_units_health_check():
    [healthcheck] = [text for text in instructions(REPO / "Dockerfile") if text.startswith("HEALTHCHECK ")]
    options, command = re.fullmatch(r"HEALTHCHECK ((?:--[\w-]+=\S+ )+)CMD (.*)", healthcheck).groups()
    assert dict(option[2:].split("=", 1) for option in options.split()) == \
        {key.replace("_", "-"): str(value) for key, value in HEALTH.items()}
    assert command == HEALTH_CMD


def test_the_images_default_user_is_the_pods_uid_in_group_0_with_their_home():
    """Non-root by default (checkov's CKV_DOCKER_3): the last USER is numeric (runAsNonRoot can judge
    only a number) and the uid, group and HOME the Kubernetes pods run with, created before it."""
    steps = instructions(REPO / "Dockerfile")
    users = [text for text in steps if text.startswith("USER ")]
    assert users and users[-1] == f"USER {POD_UID}:{POD_GID}"
    assert POD_UID >= 10000 and POD_GID == 0
    [created] = [text for text in steps if text.startswith("RUN useradd ")]
    assert f"--uid {POD_UID} --gid {POD_GID} --home-dir {POD_HOME} --create-home" in created
    assert steps.index(created) < steps.index(users[-1])
    # every RUN after USER would run as that uid: the build's own steps all come before it
    assert not [text for text in steps[steps.index(users[-1]):] if text.startswith("RUN ")]


def contract_modules_imported(folder: Path) -> set[str]:
    """contract/<name>.py files the Python under `folder` imports (`from contract import x`, `from
    contract.x import ...`, `import contract.x`)."""
    found = set()
    for source in folder.rglob("*.py"):
        text = source.read_text()
        found |= set(re.findall(r"^\s*(?:from|import) contract\.(\w+)", text, re.M))
        for names in re.findall(r"^\s*from contract import \(?([\w, ]+)", text, re.M):
            found |= {name.split()[0] for name in names.split(",") if name.strip()}  # "x as y": x
    return {f"{name}.py" for name in found}


def contract_copies() -> list[list[str]]:
    """The sources of the Dockerfile's COPYs of contract/, in order."""
    return [text.split()[1:-1] for text in instructions(REPO / "Dockerfile") if text.startswith("COPY contract/")]


def test_every_contract_module_is_copied_into_the_image_once():
    """Two COPYs, so that an edit of a module the fit check does not import does not re-run it; a module in
    both would lie in two layers, one in neither would be missing from the image."""
    copied = [source for sources in contract_copies() for source in sources]
    assert len(contract_copies()) == 2
    assert sorted(copied) == sorted(f"contract/{path.name}" for path in (REPO / "contract").glob("*.py")), copied


def test_the_fit_checks_early_copy_of_the_contract_holds_every_module_the_patches_import():
    """The Dockerfile copies part of contract/ before the fit check (so an edit elsewhere does not re-run
    it): every contract module the patches import must be in that part, or the build's fit check fails."""
    early, _ = contract_copies()
    copied = {Path(source).name for source in early}
    imported = contract_modules_imported(REPO / "patches")
    assert {"clamp_paths.py", "devices.py"} <= imported, "the search finds the imports there are"
    assert imported <= copied, f"imported by patches/ but not copied before the fit check: {imported - copied}"


def test_the_fit_step_reads_the_compile_records_from_the_build_context_and_the_image_keeps_none():
    """The committed records reach the fit step as a bind mount where image_passes looks for them, and no
    layer copies them (nor the locks): the image's contract is its modules."""
    from contract.clamp_paths import COMPILE_RECORDS_MOUNT

    texts = instructions(REPO / "Dockerfile")
    [fit_step] = [text for text in texts if "patches.fitcheck.image_passes" in text]
    assert f"--mount=type=bind,source=contract/compile-records,target={COMPILE_RECORDS_MOUNT}" in fit_step
    assert (REPO / "contract" / "compile-records").is_dir()
    copies = [text.split()[1:-1] for text in texts if text.startswith("COPY ")]
    copied = [source for sources in copies for source in sources if source.startswith("contract")]
    assert "contract/layout.py" in copied and all(source.endswith(".py") for source in copied), copied


def test_the_image_takes_the_proofs_outputs_and_the_compile_record_stage_holds_the_record_alone():
    """The proof runs in a stage of its own: the image (the last stage, the default target) copies the outputs
    the preflight and build.py read, and no other of its files; the stage build.py exports holds the record."""
    from buildtool.image.build import COMPILE_RECORD_STAGE
    from contract.clamp_paths import COMPILE_RECORD, INSTALL_DIR, PROOF_OUTPUTS

    texts = instructions(REPO / "Dockerfile")
    stages = [text.split()[-1] for text in texts if text.startswith("FROM ")]
    assert stages == ["fit-sources", "facts-sources", "sources", "code", "clamped", "proof", COMPILE_RECORD_STAGE, "image"]
    [taken] = [text.split()[1:] for text in texts if text.startswith("COPY --from=proof") and text.endswith(INSTALL_DIR + "/")]
    assert taken[1:-1] == list(PROOF_OUTPUTS) and taken[-1] == INSTALL_DIR + "/"
    assert COMPILE_RECORD not in taken and not COMPILE_RECORD.startswith(INSTALL_DIR + "/")
    start = texts.index(f"FROM scratch AS {COMPILE_RECORD_STAGE}")
    assert texts[start + 1] == f"COPY --from=proof {COMPILE_RECORD} /"
    assert texts[start + 2].startswith("FROM "), "nothing else in that stage"
