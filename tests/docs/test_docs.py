"""The docs tier (no engine, no GPU, a few seconds): every fenced shell block of README.md and
docs/*.md is marked, every command a doc gives is one its program accepts, every repository path a
doc names exists, and every list a doc keeps of the code's names is the code's list.

`run image` blocks run in the image tier (tests/image/test_doc_commands.py), against the image
under test; `run tmp` blocks run here, in a copy of the repository with HOME in a temp dir.
docs/README.md says how to mark a block.
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from entrypoint import settings
from tests.docs import doc_blocks
from tests.docs.doc_blocks import REPO, Block, Marker, read_blocks
from tests.support import gemma4_configs

BLOCKS = doc_blocks.all_blocks()


def model_dir(root: Path) -> Path:
    """{e2b}: Gemma 4 E2B's published config.json (audio and vision towers) and one small shard."""
    return gemma4_configs.published_model_dir("gemma4-e2b", root)


@pytest.fixture(scope="module")
def values(tmp_path_factory) -> dict:
    """The substitutions' values (docs/README.md lists them) for the blocks this tier runs or checks."""
    root = tmp_path_factory.mktemp("docs-values")
    return {"e2b": str(model_dir(root / "models")), "image": "IMAGE", "tmp": str(root)}


def test_every_shell_block_is_marked_and_every_block_says_its_language():
    problems = doc_blocks.unmarked_shell_blocks(BLOCKS)
    assert not problems, "\n".join(problems)


def test_every_checked_command_exists_and_its_program_accepts_its_flags(values):
    problems = doc_blocks.checked_problems(BLOCKS, values)
    assert not problems, "\n".join(problems)


def test_every_repository_path_a_doc_names_exists():
    problems = [line for path in doc_blocks.doc_files() for line in doc_blocks.missing_paths(path)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("block", doc_blocks.marked(BLOCKS, "run", "tmp"), ids=lambda b: b.where)
def test_a_run_tmp_block_runs_as_written(block, values, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(REPO, tree, ignore=shutil.ignore_patterns(".git", "__pycache__", "reports", ".cache", "results"))
    home = tmp_path / "home"
    home.mkdir()
    run = subprocess.run(["bash", "-c", doc_blocks.shell_script(block, values)], cwd=tree, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "HOME": str(home)})
    assert run.returncode == 0, f"{block.where} failed (exit {run.returncode}): {run.stderr.strip()[-800:]}"


# ---- lists the docs keep of the code's names ---------------------------------------------------

def listed_after(text: str, lead: str) -> list[str]:
    """The comma-separated names after `lead` up to the sentence's end."""
    match = re.search(re.escape(lead) + r"\s*(.*?)\.(?:\s|$)", text, re.S)
    assert match, f"the docs no longer say {lead!r}: update this test with them"
    return [name.strip(" `\n") for name in re.split(r",\s*", match.group(1).replace("\n", " "))]


def test_the_skip_checks_names_in_architecture_md_are_the_entrypoints_check_names():
    text = (REPO / "docs" / "architecture.md").read_text()
    assert listed_after(text, "for `SKIP_CHECKS` are `entrypoint.settings.CHECK_NAMES`:") == list(settings.CHECK_NAMES)


def unknown_checks(path: Path, text: str | None = None) -> list[str]:
    text = path.read_text() if text is None else text
    return sorted({f"{path.name}: preflight `{name}`" for name in re.findall(r"preflight `(\w+)`", text)
                   if name not in settings.CHECK_NAMES})


def test_every_preflight_check_a_doc_names_is_one_the_entrypoint_runs():
    unknown = [line for path in doc_blocks.doc_files() for line in unknown_checks(path)]
    assert not unknown, f"not checks of entrypoint.settings.CHECK_NAMES: {unknown}"


def test_every_entrypoint_only_setting_architecture_md_lists_is_one():
    text = (REPO / "docs" / "architecture.md").read_text()
    lead = "(`settings.ENTRYPOINT_ONLY`:"
    assert lead in text, f"architecture.md no longer says {lead!r}: update this test"
    names = re.findall(r"\b[A-Z][A-Z0-9_]+\b", text[text.index(lead) + len(lead):].split("...")[0])
    assert names and set(names) <= set(settings.ENTRYPOINT_ONLY), set(names) - set(settings.ENTRYPOINT_ONLY)


def env_file_names() -> set[str]:
    shipped = (REPO / "quadlet" / "vllm-turing.env").read_text()
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", shipped, re.M))


def test_every_setting_an_env_file_block_sets_is_one_the_image_reads():
    known = set(settings.ENTRYPOINT_ONLY) | set(settings.SHARED_WITH_SERVER) | env_file_names()
    blocks = doc_blocks.marked(BLOCKS, "env-file")
    assert blocks, "no env-file block left: drop this test or mark the blocks"
    for block in blocks:
        names = re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", block.body, re.M)
        assert names and set(names) <= known, f"{block.where}: not settings of the image: {set(names) - known}"


def test_the_releases_the_clamp_handles_are_generated_from_the_code():
    """docs/clamp.md's release table is written by bench/clamp_releases and held to the code by
    tests/unit/test_clamp_releases.py; here, only that it lists exactly the releases the code knows."""
    from tooling.vllm_releases import RELEASES

    text = (REPO / "docs" / "clamp.md").read_text()
    table = text[text.index("<!-- clamp-releases:begin"):text.index("<!-- clamp-releases:end")]
    assert re.findall(r"^\| (\d+\.\d+\.\d+) \|", table, re.M) == list(RELEASES)


# ---- the tier fails a broken doc ---------------------------------------------------------------

BROKEN = """# A doc gone wrong

<!-- docs-tier: check gpu -->
```sh
python3 build.py --base pypi --bootstrapp
docker run --rm --shm-sise 8g vllm-turing:0.33.0 check
bench/serve_sweep run --out results/x --nonsense 1
kubectl -n llm rollout status deploy/vllm-turing --timeout-seconds 20m
```

```sh
python3 build.py
```

<!-- docs-tier: run somewhere -->
```sh
true
```

It names tests/support/gpu_site.py and `preflight `gpus``.
"""


def test_a_deliberately_broken_doc_fails_the_tier(tmp_path, values):
    doc = tmp_path / "broken.md"
    doc.write_text(BROKEN)
    blocks = read_blocks(doc)
    checked = doc_blocks.checked_problems(blocks, values)
    assert len(checked) == 4, "\n".join(checked)
    assert "--bootstrapp" in checked[0] and "unknown flag --shm-sise" in checked[1], checked
    assert "--nonsense" in checked[2] and "unknown flag --timeout-seconds" in checked[3], checked
    unmarked = doc_blocks.unmarked_shell_blocks(blocks)
    assert [line.split(": ", 1)[1][:28] for line in unmarked] == ["a shell block with no docs-t", "bad docs-tier marker: run so"]
    assert doc_blocks.missing_paths(doc, repo=REPO) == [f"{doc}: names tests/support/gpu_site.py, which is not in the "
                                                         "repository"]
    assert unknown_checks(doc) == ["broken.md: preflight `gpus`"]


def test_a_failing_run_block_fails_its_test(tmp_path, values):
    block = Block(tmp_path / "x.md", 1, "sh", "true\nfalse\necho never\n", Marker("run", "tmp"))
    run = subprocess.run(["bash", "-c", doc_blocks.shell_script(block, values)], capture_output=True, text=True)
    assert run.returncode == 1 and "never" not in run.stdout


def test_substitutions_replace_host_values_with_the_tiers():
    block = read_blocks(Path("x.md"), "<!-- docs-tier: run image; vllm-turing:0.33.0 => {image}; /srv/m => {e2b} -->\n"
                                      "```sh\ndocker run -v /srv/m:/m vllm-turing:0.33.0 check\n```\n")[0]
    assert doc_blocks.substituted(block.body, block.marker, {"image": "img:1", "e2b": "/tmp/e"}) == \
        "docker run -v /tmp/e:/m img:1 check"
    assert json.dumps(block.marker.substitutions)


def test_a_mirror_marker_names_the_fetch_lines_the_image_tier_runs_and_only_a_check_takes_it():
    block = read_blocks(Path("x.md"), "<!-- docs-tier: check gpu mirror; /srv/models => {tmp}/models -->\n```sh\n"
                                      "python3 build.py\npython3 build.py model fetch org/m@main --model-dir /srv/models "
                                      "--gpu t4\n```\n")[0]
    assert block.marker.mirror and block.marker.kind == "check"
    assert doc_blocks.fetch_commands(block, {"tmp": "/t"}) == \
        [["python3", "build.py", "model", "fetch", "org/m@main", "--model-dir", "/t/models", "--gpu", "t4"]]
    with pytest.raises(ValueError, match="mirror"):
        doc_blocks.parse_marker("run tmp mirror")


def registered_parsers(kind: str) -> set[str]:
    """The parser names vLLM 0.33.0 registers (`vllm/tool_parsers` or `vllm/reasoning`), read from
    the pinned release's own files."""
    import tarfile

    from tooling.vllm_releases import package_tarball

    member = {"tool": "vllm/tool_parsers/__init__.py", "reasoning": "vllm/reasoning/__init__.py"}[kind]
    with tarfile.open(package_tarball()) as tar:
        source = tar.extractfile(member).read().decode()
    return set(re.findall(r'^\s+"([\w-]+)": \(', source, re.M))


def test_every_parser_a_doc_names_is_one_vllm_registers_and_the_entrypoint_expects():
    from entrypoint.checks.parsers import GEMMA4_PARSERS

    text = "\n".join(path.read_text() for path in doc_blocks.doc_files())
    prose = {"and", "the", "a", "its", "tool", "reasoning"}  # "the tool and reasoning parsers"
    tool = set(re.findall(r"\b(\w+) (?:reasoning and )?tool parsers?", text)) - prose
    reasoning = set(re.findall(r"\b(\w+) reasoning (?:and tool )?parsers?", text)) - prose
    assert tool, "no doc names a tool parser any more: drop this test"
    assert tool <= registered_parsers("tool") and reasoning <= registered_parsers("reasoning"), (tool, reasoning)
    assert (tool | reasoning) <= set(GEMMA4_PARSERS.values())
