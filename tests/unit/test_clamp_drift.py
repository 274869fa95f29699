"""Layouts the clamp must refuse or recognise, each built from a real release file."""
import ast
import hashlib
import json
import os
import stat

import pytest

from patches import turing_clamp
from patches.turing_clamp.placement import PATCH_VERSION, VERSION_NAME
from tooling import clamp_cycle
from tooling.clamp_cycle import launcher_of as launcher, names, run_cli

TILES = {"TILE_SIZE_PREFILL", "TILE_SIZE_DECODE"}


def renamed_tiles(source):
    return source.replace("TILE_SIZE_PREFILL", "TILE_PREFILL").replace("TILE_SIZE_DECODE", "TILE_DECODE")


def assignment_after_first_read(source):
    """The launcher's last tile assignment moved below the first statement reading the tiles."""
    body = launcher(source).body
    last = max(i for i, s in enumerate(body) if names(s, ast.Store) & TILES)
    reader = next(s for s in body[last + 1:] if names(s, ast.Load) & TILES)
    lines = source.splitlines(keepends=True)
    moved = lines[body[last].lineno - 1:body[last].end_lineno]
    rest = lines[:body[last].lineno - 1] + lines[body[last].end_lineno:reader.end_lineno]
    return "".join(rest + moved + lines[reader.end_lineno:])


def truncated(source):
    """Cut three lines into the launcher's signature: an unclosed parenthesis."""
    lines = source.splitlines(keepends=True)
    return "".join(lines[:launcher(source).lineno + 2])


def two_launchers(source):
    node = launcher(source)
    lines = source.splitlines(keepends=True)
    copy = "".join(lines[node.lineno - 1:node.end_lineno]).replace(
        "def unified_attention(", "def unified_attention_copy(", 1)
    return source + "\n\n" + copy


def block_m_renamed(source):
    return source.replace("BLOCK_M =", "BLOCK_ROWS =")


def upstream_sizes_from_shared_memory(source):
    """What vLLM PR 39018 proposes: _get_tile_size() asks the device for its shared memory."""
    tree = ast.parse(source)
    helper = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_get_tile_size")
    after_docstring = helper.body[1]
    lines = source.splitlines(keepends=True)
    check = (
        "    if head_size >= 512 and torch.cuda.is_available():\n"
        "        props = torch.cuda.get_device_properties(torch.cuda.current_device())\n"
        "        if props.shared_memory_per_block_optin < 98304:\n"
        "            return 16\n"
    )
    at = after_docstring.lineno - 1
    return "".join(lines[:at] + [check] + lines[at:])


DRIFT = {
    "tile names renamed": (renamed_tiles, "no function assigns TILE_SIZE_PREFILL"),
    "assignment moved after the first read": (assignment_after_first_read, "is read at line"),
    "truncated file": (truncated, "does not parse"),
    "two launchers": (two_launchers, "several functions assign the tile sizes"),
    "BLOCK_M gone": (block_m_renamed, "BLOCK_M is not assigned"),
}


def files_in(folder):
    return sorted(p.name for p in folder.iterdir())


def assert_refused(result, target, before, what, version):
    assert result.returncode == 2
    assert target.read_bytes() == before, "a refusal writes nothing"
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in message
    assert str(target) in message and f"vLLM {version}" in message
    assert what in message


@pytest.mark.parametrize("version", ["0.19.0", "0.22.1", "0.33.0"])
@pytest.mark.parametrize("case", sorted(DRIFT))
def test_drift_is_refused(case, version, tmp_path):
    make, what = DRIFT[case]
    target = clamp_cycle.copy_release(version, tmp_path)
    target.write_text(make(target.read_text()))
    before, listing = target.read_bytes(), files_in(target.parent)

    assert_refused(run_cli("apply", "--target", target), target, before, what, version)
    assert_refused(run_cli("show", "--target", target), target, before, what, version)
    assert files_in(target.parent) == listing, "no temporary file left behind"

    report = turing_clamp.apply(target)
    assert report.outcome is turing_clamp.Outcome.REFUSED and report.sha256_before == report.sha256_after


def test_json_refusal_still_says_why_on_stderr(tmp_path):
    """A build runs `apply --json > report`: its log must still carry the refusal's line."""
    target = clamp_cycle.copy_release("0.33.0", tmp_path)
    target.write_text(renamed_tiles(target.read_text()))
    run = run_cli("apply", "--json", "--target", target)
    assert run.returncode == 2
    assert json.loads(run.stdout)["outcome"] == "refused"
    assert run.stderr.strip() == json.loads(run.stdout)["message"], "stderr lacks the refusal's one line"


def test_read_only_file_is_refused_untouched(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path)
    target.chmod(0o444)
    before, listing = target.read_bytes(), files_in(target.parent)
    result = run_cli("apply", "--target", target)
    assert_refused(result, target, before, "read-only", "0.33.0")
    assert stat.S_IMODE(target.stat().st_mode) == 0o444
    assert files_in(target.parent) == listing


def test_apply_keeps_the_file_mode(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path)
    target.chmod(0o640)
    assert turing_clamp.apply(target).outcome is turing_clamp.Outcome.APPLIED
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_missing_file_is_an_error(tmp_path):
    missing = tmp_path / "vllm" / "triton_unified_attention.py"
    for command, code in (("check", 2), ("apply", 2), ("show", 2)):
        result = run_cli(command, "--target", missing)
        assert result.returncode == code
        assert str(missing) in result.stderr and "Traceback" not in result.stderr
    assert not missing.exists()


def test_truncated_file_check_is_an_error(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path)
    target.write_text(truncated(target.read_text()))
    result = run_cli("check", "--target", target, "--json")
    assert result.returncode == 2
    assert json.loads(result.stdout)["outcome"] == "error"


def test_a_second_clamp_call_is_counted_and_refused(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path)
    turing_clamp.apply(target)
    source = target.read_text()
    call = next(s for s in launcher(source).body if "_vllm_turing_clamp" in ast.unparse(s))
    lines = source.splitlines(keepends=True)
    doubled = lines[:call.end_lineno] + lines[call.lineno - 1:call.end_lineno] + lines[call.end_lineno:]
    target.write_text("".join(doubled))
    before = target.read_bytes()

    checked = run_cli("check", "--target", target)
    assert checked.returncode == 2 and "1 clamp definitions and 2 clamp calls" in checked.stderr
    assert_refused(run_cli("apply", "--target", target), target, before, "2 clamp calls", "0.33.0")


def test_a_comment_mentioning_the_clamp_is_not_a_clamp(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path)
    target.write_text(target.read_text() + "\n# _vllm_turing_clamp( was here once\n")
    assert run_cli("check", "--target", target).returncode == 1


@pytest.mark.parametrize("version", ["0.19.0", "0.33.0"])
def test_upstream_sizing_is_recognised_and_left_alone(version, tmp_path):
    target = clamp_cycle.copy_release(version, tmp_path)
    target.write_text(upstream_sizes_from_shared_memory(target.read_text()))
    before = target.read_bytes()

    applied = run_cli("apply", "--target", target, "--json")
    assert applied.returncode == 0
    report = json.loads(applied.stdout)
    assert report["outcome"] == "skipped" and "upstream" in report["message"]
    assert report["sha256_after"] == report["sha256_before"] == hashlib.sha256(before).hexdigest()
    assert target.read_bytes() == before

    checked = run_cli("check", "--target", target)
    assert checked.returncode == 0 and checked.stdout.startswith("upstream")
    assert run_cli("show", "--target", target).stdout == ""


def test_an_older_clamp_is_replaced_by_this_one(tmp_path):
    fresh = clamp_cycle.copy_release("0.33.0", tmp_path / "fresh")
    older = clamp_cycle.copy_release("0.33.0", tmp_path / "older")
    turing_clamp.apply(fresh)
    turing_clamp.apply(older)
    older.write_text(older.read_text().replace(
        f"{VERSION_NAME} = {PATCH_VERSION}\n", f"{VERSION_NAME} = {PATCH_VERSION - 1}\n", 1))

    checked = run_cli("check", "--target", older)
    assert checked.returncode == 1 and "run `python -m patches.turing_clamp apply`" in checked.stdout
    assert turing_clamp.apply(older).outcome is turing_clamp.Outcome.APPLIED
    assert older.read_bytes() == fresh.read_bytes()


def test_a_clamp_of_unknown_version_is_outdated(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path)
    turing_clamp.apply(target)
    target.write_text(target.read_text().replace(f"{VERSION_NAME} = ", f"{VERSION_NAME} = 0 + ", 1))
    checked = run_cli("check", "--target", target)
    assert checked.returncode == 1 and "unknown version" in checked.stdout


def test_crlf_file_keeps_its_line_endings(tmp_path):
    target = clamp_cycle.copy_release("0.33.0", tmp_path)
    original = target.read_bytes().replace(b"\n", b"\r\n")
    target.write_bytes(original)
    assert turing_clamp.apply(target).outcome is turing_clamp.Outcome.APPLIED
    patched = target.read_bytes()
    assert patched.count(b"\n") == patched.count(b"\r\n")
    assert turing_clamp.check(target).outcome is turing_clamp.Outcome.PRESENT
    assert turing_clamp.strip_clamp(patched.decode()).encode() == original
    assert os.path.getsize(target) > len(original)


def test_the_patch_version_read_by_pattern_is_the_one_the_runtime_block_assigns():
    from patches.turing_clamp.placement import RUNTIME_BLOCK

    assigned = [ast.literal_eval(node.value) for node in ast.parse(RUNTIME_BLOCK).body
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == VERSION_NAME]
    assert assigned == [PATCH_VERSION] and isinstance(PATCH_VERSION, int)
