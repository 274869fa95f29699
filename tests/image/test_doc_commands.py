"""The docs' `run image` blocks (docs/README.md), run as written against the image under test, with
the marker's substitutions for the image tag and the model folder. On this GPU-less host a block may
exit 1 only where every failing preflight line is a device line: what the README promises of
`check` on a host without a GPU."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.docs import doc_blocks
from tests.docs.test_docs import model_dir
from buildtool.units.spec import MODEL_MOUNT
from entrypoint.fetch import manifest
from entrypoint.fetch.request import parse_model_ref
from tests import REPO
from tests.support import gemma4_configs
from tests.support.docker_bridge import bridge_gateway
from tooling.hub_mirror import HubMirror

RUN_IMAGE = doc_blocks.marked(doc_blocks.all_blocks(), "run", "image")
DEVICE_LINES = {"devices", "driver"}


def test_the_readme_check_line_is_a_run_image_block():
    assert any("check" in block.body and block.path.name == "README.md" for block in RUN_IMAGE), \
        "README's `check` line is no longer run by this tier"


@pytest.mark.parametrize("block", RUN_IMAGE, ids=lambda b: b.where)
def test_a_run_image_block_does_what_the_doc_says(block, image, tmp_path):
    values = {"image": image, "e2b": str(model_dir(tmp_path / "models")), "tmp": str(tmp_path)}
    run = subprocess.run(["bash", "-c", doc_blocks.shell_script(block, values)], cwd=REPO, capture_output=True,
                         text=True, timeout=600, env=os.environ)
    failing = set(re.findall(r"^FAIL\s+(\w+)", run.stdout, re.M))
    assert run.returncode == 0 or (run.returncode == 1 and failing and failing <= DEVICE_LINES), \
        f"{block.where} exit {run.returncode}; failing checks {sorted(failing)}:\n{(run.stdout + run.stderr)[-1500:]}"


# ---- the docs' fetch lines, against a real Hub mirror ----------------------------------------------
# A `check ... mirror` block's `build.py model fetch` lines run here as written (the marker's
# substitution moves the models folder into a temp dir), with the image under test as
# VLLM_TURING_IMAGE (the default `--image`) and HF_ENDPOINT a local olah mirror serving the repository
# the line names, made here from Gemma 4 E2B's published config.json and one small shard. The mirror
# listens on the host's address on Docker's bridge, where the fetch's container reaches it.

FETCHED = [block for block in doc_blocks.all_blocks() if block.marker and block.marker.mirror]


def test_the_four_command_paths_fetch_line_runs_against_a_mirror():
    assert any("python3 build.py units" in block.body for block in FETCHED), \
        "docs/deploy.md's four commands are no longer marked `mirror`: their fetch line is not run"


@pytest.mark.parametrize("block", FETCHED, ids=lambda b: b.where)
def test_a_docs_fetch_line_fetches_judges_and_verifies_from_a_hub_mirror(block, image, docker_client, tmp_path):
    values = {"image": image, "e2b": "", "tmp": str(tmp_path)}
    lines = doc_blocks.fetch_commands(block, values)
    assert lines, f"{block.where} is marked mirror but has no `build.py model fetch` line"
    mirror = HubMirror(tmp_path / "hub", host=bridge_gateway(docker_client)).start()
    try:
        for words in lines:
            ref = next(word for word in words[4:] if not word.startswith("-"))
            repo_id, revision = parse_model_ref(ref)
            repo = mirror.repo(repo_id)
            repo.put_folder(gemma4_configs.published_model_dir("gemma4-e2b", tmp_path / "made" / repo_id))
            commit = repo.commit()
            run = subprocess.run(words, cwd=REPO, capture_output=True, text=True, timeout=600,
                                 env=mirror.env(VLLM_TURING_IMAGE=image))
            assert run.returncode == 0, f"{block.where}: {' '.join(words)} exit {run.returncode}:\n{run.stderr[-2000:]}"
            models = Path(words[words.index("--model-dir") + 1])
            name = repo_id.rsplit("/", 1)[-1]
            assert f"verified; manifest {MODEL_MOUNT}/{name}/{manifest.NAME}" in run.stderr, run.stderr[-2000:]
            written = json.loads((models / name / manifest.NAME).read_text())
            gpu = words[words.index("--gpu") + 1]
            assert (written["repo"], written["revision"], written["commit"], written["gpu"]) == \
                (repo_id, revision, commit, gpu), written
            assert set(written["verdict"].values()) == {"pass"}, written["verdict"]
            assert {file["path"] for file in written["files"]} == {"config.json", "model.safetensors"}
    finally:
        mirror.stop()
