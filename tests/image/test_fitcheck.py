"""The fit check inside the image under test: its real vLLM launcher, its real Triton compiler.

This checkout (patches/ and entrypoint/) is mounted into the container; the vLLM file is
patched or stripped inside the throwaway container only. One Triton cache serves the whole
module, so only the first run compiles from nothing; the run-time checks with the image's fit
table start from an empty cache of their own, so the cache shows what they compiled.
"""
import json
import re

import pytest

from contract.devices import AMPERE, TURING
from tests.image.containers import run_to_end
from tests.support import family_configs, gemma4_configs
from tests import REPO

SM75_LIMIT = TURING.limit
KNOWN_FAILURE = 98304  # head 512, TILE_SIZE 32, BLOCK_M 16 on sm_75 (vLLM 0.33.0, Triton 3.8)

FAMILIES = "/models/families"  # one folder per tests/support/family_configs.py model
ENCODERS = "/models/encoders"  # one folder per tests/support/family_configs.py ENCODER_MODELS entry
HYBRIDS = "/models/hybrids"  # one folder per tests/support/family_configs.py HYBRID_MODELS entry
MLA_MODELS = "/models/mla"  # one folder per tests/support/family_configs.py MLA_MODELS entry
APPLY = "python3 -m patches.turing_clamp apply >/dev/null"
STRIP = ("python3 -c 'from patches.turing_clamp import find_target, strip_clamp; "
         "p = find_target(); p.write_text(strip_clamp(p.read_text()))'")
E2B_LIKE = {"model_type": "gemma4_text", "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
            "global_head_dim": 512, "sliding_window": 512,
            "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7}


@pytest.fixture(scope="module")
def mounts(tmp_path_factory):
    """Checkout (read-only), a Triton cache, a folder holding an E2B-like config.json and one holding
    the 12B's config.json as transformers' save_pretrained writes it (per_layer_config form)."""
    cache = tmp_path_factory.mktemp("triton-cache")
    model = tmp_path_factory.mktemp("model") / "gemma-4-e2b-like"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(E2B_LIKE))
    twelve = tmp_path_factory.mktemp("model") / "gemma-4-12B-it"
    gemma4_configs.save_model_dir("gemma4-12b", twelve)
    families = tmp_path_factory.mktemp("families")
    for name in family_configs.MODELS:
        family_configs.save_model_dir(name, families / name)
    encoders = tmp_path_factory.mktemp("encoders")
    for name in family_configs.ENCODER_MODELS:
        family_configs.save_model_dir(name, encoders / name)
    hybrids = tmp_path_factory.mktemp("hybrids")
    for name in family_configs.HYBRID_MODELS:
        family_configs.save_model_dir(name, hybrids / name)
    mla = tmp_path_factory.mktemp("mla")
    for name in family_configs.MLA_MODELS:
        family_configs.save_model_dir(name, mla / name)
    return {str(mla): {"bind": MLA_MODELS, "mode": "ro"}, str(hybrids): {"bind": HYBRIDS, "mode": "ro"}, str(encoders): {"bind": ENCODERS, "mode": "ro"},str(REPO): {"bind": "/src", "mode": "ro"}, str(cache): {"bind": "/triton-cache", "mode": "rw"},
            str(model): {"bind": "/models/gemma-4-e2b-like", "mode": "ro"},
            str(twelve): {"bind": "/models/gemma-4-12B-it", "mode": "ro"},
            str(families): {"bind": FAMILIES, "mode": "ro"}}


@pytest.fixture
def run_in_image(docker_client, image, mounts):
    """Runs a bash script in a fresh container of the image, as root (some take the clamp out of the
    installed vLLM, which the image's own uid may not write); returns (exit code, stdout, stderr)."""
    def run(script: str):
        return run_to_end(
            docker_client, image, [], timeout=900, entrypoint=["bash", "-c", f"set -e\n{script}"], user="0:0",
            environment={"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": "/src", "TRITON_CACHE_DIR": "/triton-cache"},
            volumes=mounts, working_dir="/src")
    return run


def passing_report(run_in_image, script: str) -> tuple[dict, str]:
    """The JSON report of a fit check run that must exit 0, and its stderr."""
    code, out, err = run_in_image(script)
    assert code == 0, err[-2000:]
    return json.loads(out), err


def not_fitting(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("fitcheck: does not fit:")]


def test_unpatched_head_512_on_sm75_needs_98304_bytes_and_fails(run_in_image):
    code, out, err = run_in_image(f"{STRIP}\npython3 -m patches.fitcheck --device sm75 --matrix gemma4")
    assert code == 1, err[-2000:]
    failures = not_fitting(err)
    assert failures, err[-2000:]
    assert all("head 512" in line and f"needs {KNOWN_FAILURE} bytes" in line for line in failures), failures
    assert any("prefill" in line for line in failures) and any("decode-batch" in line for line in failures)
    assert "launches do NOT fit" in out


def test_patched_every_launch_fits_sm75_and_the_table_is_written(run_in_image):
    report, err = passing_report(run_in_image, (
        f"{APPLY}\npython3 -m patches.fitcheck --device sm75 --matrix gemma4 --write-table /tmp/fit-table.json "
        "--compare-unpatched --json\ncat /tmp/fit-table.json >&2"))
    assert report["all_fit"] is True and report["device"] == {"name": "sm75", "cc": 75, "limit": SM75_LIMIT}
    assert report["launches"] and all(row["shared"] <= SM75_LIMIT for row in report["launches"])
    assert report["max_shared"] <= SM75_LIMIT
    assert {row["path"] for row in report["launches"]} == {"2d", "3d", "reduce"}
    assert {row["head_size"] for row in report["launches"]} == {256, 512}
    assert {row["kind"] for row in report["launches"]} >= {"prefill", "decode", "spec", "mm-prefix"}
    # Side by side: the same launches without the clamp include the known failure.
    assert max(row["shared"] for row in report["unpatched"]) == KNOWN_FAILURE
    assert report["inert"] is False
    table = json.loads(err[err.index('{"format"'):])
    wide = [e for e in table["entries"] if e["head_size_padded"] == 512 and e["path"] == "2d"]
    assert {e["tile_size"]: e["shared"] for e in wide} == {32: KNOWN_FAILURE, 16: SM75_LIMIT}


def test_at_the_sm90_limit_patched_launches_equal_unpatched(run_in_image):
    report, _ = passing_report(run_in_image, (
        f"{APPLY}\npython3 -m patches.fitcheck --device sm90 --model-config /models/gemma-4-e2b-like/config.json "
        "--write-table /tmp/fit-table.json --compare-unpatched --json"))
    assert report["inert"] is True
    keys = ("kernel", "path", "grid", "tile_size", "block_m", "launch_num_warps", "launch_num_stages")
    patched = [tuple(str(row[k]) for k in keys) for row in report["launches"]]
    assert patched == [tuple(str(row[k]) for k in keys) for row in report["unpatched"]]
    assert any(row["head_size"] == 512 and row["tile_size"] == 32 for row in report["launches"])


WRONG_TILE = r"""
python3 - <<'PY'
import sys
from patches.turing_clamp.placement import CLAMP_FUNCTION
from patches.fitcheck.recorder import installed_launcher

def wrong_tile(q, block_m, tile_prefill, tile_decode, num_warps=None, num_stages=None, **_):
    return 64, 64, num_stages

setattr(installed_launcher(), CLAMP_FUNCTION, wrong_tile)
from patches.fitcheck.__main__ import main
sys.exit(main(["--device", "sm75", "--model-config", "/models/gemma-4-e2b-like/config.json"]))
PY
"""


def test_a_wrong_tile_choice_fails_naming_the_launch(run_in_image):
    code, out, err = run_in_image(f"{APPLY}\n{WRONG_TILE}")
    assert code == 1, err[-2000:]
    failures = not_fitting(err)
    assert failures and all("TILE_SIZE 64" in line for line in failures), failures
    assert any(line.startswith("fitcheck: does not fit: gemma-4-e2b-like/global prefill") for line in failures)


# The run-time check: the image's fit table (written by its build) instead of compiles.
IMAGE_TABLE = "/opt/vllm-turing/fit-table.json"
EMPTY_CACHE = "export TRITON_CACHE_DIR=$(mktemp -d)"
COMPILED_KERNELS = "find \"$TRITON_CACHE_DIR\" -name '*.cubin' -printf 'cubin %f\\n' >&2"
HEAD_32_LIKE = dict(E2B_LIKE, head_dim=32, global_head_dim=256)  # head 32: below every family's, not in the table


def known_table_check(config: str, cc: int = 75, limit: int = SM75_LIMIT, table: str = IMAGE_TABLE) -> str:
    return (f"python3 -m patches.fitcheck --model-config {config} --cc {cc} --limit {limit} "
            f"--known-table {table} --json")


def cubins(stderr: str) -> list[str]:
    return sorted(line.split()[1] for line in stderr.splitlines() if line.startswith("cubin "))


def is_attention(row: dict) -> bool:
    return row["path"] in ("2d", "3d")


def test_with_the_images_fit_table_no_attention_kernel_is_compiled(run_in_image):
    config = "/models/gemma-4-e2b-like/config.json"
    report, err = passing_report(run_in_image, f"{EMPTY_CACHE}\n{known_table_check(config)}\n{COMPILED_KERNELS}")
    rows = report["launches"]
    assert report["all_fit"] is True and {row["head_size"] for row in rows} == {256, 512}
    assert all(row["source"] == "table" for row in rows if is_attention(row)), rows
    # The table holds attention launches only: the split-K reduction is the one kernel compiled.
    assert {row["source"] for row in rows if not is_attention(row)} == {"compiled"}
    assert cubins(err) and set(cubins(err)) == {"reduce_segments.cubin"}, cubins(err)
    assert report["known_table"] == {"path": IMAGE_TABLE, "used": True, "ignored_because": None,
                                     "from_table": sum(map(is_attention, rows)),
                                     "compiled": len(rows) - sum(map(is_attention, rows))}
    # The table's numbers are the compiler's: compiling the same launches gives the same bytes.
    compiled, _ = passing_report(run_in_image, f"python3 -m patches.fitcheck --model-config {config} "
                                               f"--cc 75 --limit {SM75_LIMIT} --json")
    identity = ("model", "layer", "kind", "query_len", "path", "tile_size", "shared")
    assert [tuple(r[k] for k in identity) for r in rows] == [tuple(r[k] for k in identity)
                                                             for r in compiled["launches"]]
    assert {r["source"] for r in compiled["launches"]} == {"compiled"} and "known_table" not in compiled


def test_launches_the_table_lacks_are_compiled(run_in_image):
    config = "/tmp/head-32-like/config.json"
    write = f"mkdir -p /tmp/head-32-like\ncat > {config} <<'JSON'\n{json.dumps(HEAD_32_LIKE)}\nJSON"
    report, err = passing_report(run_in_image, f"{EMPTY_CACHE}\n{write}\n{known_table_check(config)}\n{COMPILED_KERNELS}")
    attention = [row for row in report["launches"] if is_attention(row)]
    assert {row["head_size"] for row in attention} == {32, 256}
    assert {row["source"] for row in attention if row["head_size"] == 32} == {"compiled"}
    assert {row["source"] for row in attention if row["head_size"] == 256} == {"table"}
    assert "kernel_unified_attention.cubin" in cubins(err)
    assert report["known_table"]["used"] is True and report["known_table"]["compiled"] > 0


def test_a_table_of_another_triton_is_ignored_and_every_launch_compiled(run_in_image):
    other = "/tmp/other-triton.json"
    rewrite = (f"python3 -c 'import json; t = json.load(open(\"{IMAGE_TABLE}\")); t[\"triton_version\"] = \"0.0.1\"; "
               f"json.dump(t, open(\"{other}\", \"w\"))'")
    report, _ = passing_report(run_in_image, f"{rewrite}\n"
                                             f"{known_table_check('/models/gemma-4-e2b-like/config.json', table=other)}")
    note = report["known_table"]
    assert note["used"] is False and "Triton 0.0.1" in note["ignored_because"] and note["from_table"] == 0
    assert {row["source"] for row in report["launches"]} == {"compiled"}


def test_a_missing_known_table_is_bad_input(run_in_image):
    code, out, err = run_in_image(known_table_check("/models/gemma-4-e2b-like/config.json", table="/nowhere.json"))
    assert code == 2 and out == "", err[-2000:]
    assert err.strip().splitlines()[-1].startswith("fitcheck: --known-table /nowhere.json: no such file")


PREFLIGHT_FIT = r"""
python3 - <<'PY'
from contract.model_config import parse_config
from entrypoint.checks.clamp import start_fit
import json
config = "/models/gemma-4-e2b-like/config.json"
result = start_fit(config, parse_config(json.load(open(config))), (7, 5), 65536)()
print(result.status.value, result.message)
PY
"""


def test_the_preflight_fit_check_answers_from_the_images_table_without_compiling(run_in_image):
    # The build recorded a verdict per layer shape and device: the preflight reads config.json and
    # answers from it, with no subprocess and no kernel compiled (the split-K reduction included).
    code, out, err = run_in_image(f"{EMPTY_CACHE}\n{PREFLIGHT_FIT}\n{COMPILED_KERNELS}")
    assert code == 0, err[-2000:]
    assert out.startswith("pass ") and "from the fit table's verdicts, nothing compiled" in out, out
    assert cubins(err) == [], cubins(err)


def test_the_12b_global_layer_runs_at_16_to_1_with_the_models_decode_threshold(run_in_image):
    # The real launcher on the 12B's 16:1 global layer: BLOCK_M 16, so BLOCK_Q 1; vLLM's split-K
    # threshold is 128 // 8 (the model's KV heads), so 17 sequences take the 2D kernel and every
    # speculative length the 3D one. All of it fits sm_75 from the image's table.
    report, _ = passing_report(run_in_image, known_table_check("/models/gemma-4-12B-it/config.json"))
    rows = [row for row in report["launches"] if row["layer"] == "global" and is_attention(row)]
    assert {(row["head_size"], row["block_m"], row["block_q"]) for row in rows} == {(512, 16, 1)}
    assert {(row["num_seqs"], row["path"]) for row in rows if row["kind"] == "decode-batch"} == {(17, "2d")}
    assert {row["path"] for row in rows if row["kind"] == "spec"} == {"3d"}
    assert report["all_fit"] is True


# A clamped vLLM with no fit table (a host install patched by hand, a deleted table): the clamp
# keeps vLLM's tiles for Triton to judge, and the simulated device refuses what does not fit.
NO_TABLE = "export TURING_CLAMP_FIT_TABLE=/nowhere/fit-table.json"


def test_without_a_table_every_launch_still_fits_sm75(run_in_image):
    report, err = passing_report(run_in_image, f"{APPLY}\n{NO_TABLE}\n"
                                               "python3 -m patches.fitcheck --device sm75 --matrix gemma4 "
                                               "--compare-unpatched --json")
    assert report["all_fit"] is True and report["max_shared"] <= SM75_LIMIT, err[-2000:]
    assert {row["head_size"] for row in report["launches"]} == {256, 512}
    assert {row["kind"] for row in report["launches"]} >= {"prefill", "decode", "spec", "mm-prefix"}
    assert {row["source"] for row in report["launches"]} == {"compiled"}
    # The same launches unclamped include the known failure: the step-down did the work.
    assert max(row["shared"] for row in report["unpatched"]) == KNOWN_FAILURE
    wide_prefill = {row["tile_size"] for row in report["launches"]
                    if row["head_size"] == 512 and row["path"] == "2d"}
    assert wide_prefill == {16}, wide_prefill


def test_without_a_table_the_sm90_limit_changes_nothing(image, docker_client, run_in_image):
    report, _ = passing_report(run_in_image, (
        f"{APPLY}\n{NO_TABLE}\npython3 -m patches.fitcheck --device sm90 "
        "--model-config /models/gemma-4-e2b-like/config.json --compare-unpatched --json"))
    assert report["inert"] is True and report["all_fit"] is True
    keys = ("kernel", "path", "grid", "tile_size", "block_m", "launch_num_warps", "launch_num_stages")
    patched = [tuple(str(row[k]) for k in keys) for row in report["launches"]]
    assert patched == [tuple(str(row[k]) for k in keys) for row in report["unpatched"]]
    assert any(row["head_size"] == 512 and row["tile_size"] == 32 for row in report["launches"])


# The families' layers: proven by the build, answered at preflight from the build's verdicts.
def build_reports(docker_client, image) -> tuple[dict, dict, dict]:
    """The image's sm_75 and sm_86 fit reports and its fit table, as its build wrote them."""
    from contract.clamp_paths import FIT_REPORT, FIT_REPORT_SM86, FIT_TABLE, parse_report
    from tests.image.containers import files_in_image

    paths = (FIT_REPORT, FIT_REPORT_SM86, FIT_TABLE)
    found = files_in_image(docker_client, image, paths)
    return tuple(parse_report(path, found[path]) for path in paths)


def proven_rows(reports, shape) -> list[list[dict]]:
    """Per device report (sm_75, sm_86): the rows of the built-in shape, each report passing on its cc."""
    rows = []
    for report, cc in zip(reports, (75, 86)):
        assert report["all_fit"] is True and report["device"]["cc"] == cc
        own = [row for row in report["launches"] if (row["model"], row["layer"]) == (shape.model, shape.layer)]
        assert own and all(row["fits"] for row in own) and {row["head_size"] for row in own} == {shape.head_size}, shape
        rows.append(own)
    return rows


def test_the_build_proved_every_family_layer_on_sm75_and_sm86_on_both_paths(image, docker_client):
    from patches.fitcheck.families.dense import FAMILY_SHAPES

    sm75, sm86, fit_table = build_reports(docker_client, image)
    for shape in FAMILY_SHAPES:
        for rows in proven_rows((sm75, sm86), shape):
            assert {row["path"] for row in rows} >= {"2d", "3d"}, shape.layer
    verdicts = {(v["cc"], v["head_size"], v["queries_per_kv"], v["sliding_window"]) for v in fit_table["verdicts"]}
    assert {(cc, s.head_size, s.queries_per_kv, s.sliding_window) for s in FAMILY_SHAPES for cc in (75, 86)} <= verdicts


def test_the_build_answered_from_the_committed_record_what_it_holds_and_it_is_current(docker_client, image,
                                                                                       image_labels):
    """The build's own record (every shared-memory-only answer of its fit step, exported from the Dockerfile's
    compile-record stage, not in the image) is the repository's, so a fresh host's build of this tree compiles
    only the full confirming compiles; a tree whose matrix or clamp changed fails here until the record a
    PyPI-base build wrote back is committed."""
    import gzip

    from buildtool.docker.engine import files_in_image
    from buildtool.image.build import export_compile_record
    from buildtool.image.verify import COMPILE_RECORDS
    from contract import compile_record
    from contract.clamp_paths import COMPILE_RECORD, FIT_TABLE
    from contract.pins import pypi_base_tag

    base = image_labels["org.opencontainers.image.base.name"]
    built = compile_record.parse_record(gzip.decompress(export_compile_record(base)).decode())
    assert built.answers and all(a.error is None for a in built.answers.values()), "every matrix compile succeeds"
    assert {a.cc for a in built.answers.values()} == {75, 86, 90}
    held = files_in_image(docker_client, image, [FIT_TABLE, COMPILE_RECORD])
    assert held[FIT_TABLE] is not None and held[COMPILE_RECORD] is None, "the image takes the table, not the record"
    if base != pypi_base_tag(built.vllm_version):
        return  # another base's Triton (its own cache keys): the repository's record is the PyPI base's
    committed = compile_record.record_path(COMPILE_RECORDS, built.vllm_version)
    assert compile_record.read_record(committed) == built, (
        f"{committed.relative_to(REPO)} is not the record of this tree's build: `python3 build.py --base pypi` "
        "wrote it back; commit it")


def test_verify_takes_a_compile_record_where_it_has_one_and_compiles_without(docker_client, image):
    """`build.py verify IMAGE` gives the fit check the repository's record of the image's vLLM (the image holds
    none); without a record the check compiles what it would have answered, and passes the same."""
    from buildtool.image.verify import committed_record, verify_image

    record = committed_record(docker_client, image)
    assert record is not None, "the repository holds the record of the pinned vLLM"
    for given, says in ((record, "compiles answered by the build's compile record"), (None, None)):
        findings = verify_image(docker_client, image, given)
        assert [f.name for f in findings if f.failed] == [], [(f.name, f.message) for f in findings]
        [fit] = [f for f in findings if "fits sm_75" in f.name]
        assert "max shared" in fit.message and ((says in fit.message) if says else "compile record" not in fit.message), \
            fit.message


PREFLIGHT_EACH = r"""
python3 - <<'PY'
import json, os
from contract.model_config import parse_config
from entrypoint.checks.clamp import start_fit
for name in sorted(os.listdir("%s")):
    path = f"%s/{name}/config.json"
    for cc, limit in %r:
        result = start_fit(path, parse_config(json.load(open(path))), tuple(cc), limit)()
        print(json.dumps([name, cc, result.status.value, result.message]))
PY
"""


def preflight_each(folder: str, devices=(((7, 5), SM75_LIMIT),)) -> str:
    """A script printing the preflight fit check's answer for every model folder under `folder` on each
    (compute capability, limit), one JSON line [name, cc, status, message] each."""
    return PREFLIGHT_EACH % (folder, folder, devices)


FAMILY_PREFLIGHT = preflight_each(FAMILIES)


def test_llama_qwen_mistral_and_nemotron_configs_need_no_compile_at_preflight(run_in_image):
    code, out, err = run_in_image(f"{EMPTY_CACHE}\n{FAMILY_PREFLIGHT}\n{COMPILED_KERNELS}")
    assert code == 0, err[-2000:]
    answers = {name: (status, message) for name, _, status, message in map(json.loads, out.splitlines())}
    assert set(answers) == set(family_configs.MODELS)
    for name, (status, message) in answers.items():
        assert status == "pass" and "from the fit table's verdicts, nothing compiled" in message, (name, message)
    assert cubins(err) == [], cubins(err)


LOOKUP_VS_COMPILE = r"""
python3 - <<'PY'
import json, subprocess, sys
from contract.model_config import parse_config
from patches.fitcheck.lookup import lookup
path = "%s/{name}/config.json"
for name in sys.argv[1:] or %r:
    config = path.format(name=name)
    found = lookup("/opt/vllm-turing/fit-table.json", parse_config(json.load(open(config))), 75, 65536, config)
    full = subprocess.run([sys.executable, "-m", "patches.fitcheck", "--model-config", config, "--device", "sm75",
                           "--json"], capture_output=True, text=True)
    report = json.loads(full.stdout)
    print(json.dumps([name, found.hit, found.max_shared, found.all_fit, report["max_shared"], report["all_fit"],
                      sorted({row["source"] for row in report["launches"]})]))
PY
"""


def test_a_family_verdict_equals_a_full_compile_of_a_model_with_other_head_counts(run_in_image):
    # The verdicts were compiled with 2 KV heads per layer; these models have 8 or 4, and the
    # full check compiles their own launches: the largest need must be the verdict's.
    names = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.1"]
    code, out, err = run_in_image(LOOKUP_VS_COMPILE % (FAMILIES, names))
    assert code == 0, err[-2000:]
    for name, hit, looked_up, fits, compiled, compiled_fits, sources in map(json.loads, out.splitlines()):
        assert hit and sources == ["compiled"], name
        assert (looked_up, fits) == (compiled, compiled_fits), name


# Encoder (bidirectional) attention: vLLM's context_attention_fwd, the clamp's second site.
STRIP_ENCODER = ("python3 -c 'from patches.turing_clamp import SITES, find_target, strip_clamp; "
                 "p = find_target(SITES[\"encoder\"]); p.write_text(strip_clamp(p.read_text()))'")
ENCODER_HEAD256_SM75 = 131072  # vLLM's BLOCK 64 at head 256 on sm_75 (Triton 3.8.0)


def test_the_build_proved_every_encoder_layer_on_sm75_and_sm86_and_its_clamp_did_the_work(image, docker_client):
    from patches.fitcheck.families.encoders import ENCODER_SHAPES

    sm75, sm86, fit_table = build_reports(docker_client, image)
    for shape in ENCODER_SHAPES:
        for rows in proven_rows((sm75, sm86), shape):
            assert {row["path"] for row in rows} == {"encoder"}, shape.layer
    # the same launches unclamped (the sm_75 pass compares): head 256 needs twice Turing's limit
    unclamped = {row["layer"]: row for row in sm75["unpatched"] if row["model"] == "encoder"}
    assert unclamped["encoder-head256-r3"]["shared"] == ENCODER_HEAD256_SM75
    clamped = {row["layer"]: row for row in sm75["launches"] if row["model"] == "encoder"}
    # EmbeddingGemma's head 256: the fail-safe BLOCK 32 at vLLM's 8 warps fits; the ranked configurations
    # take BLOCK 16 at 4 warps (6.2x faster on the Turing proxy, docs/clamp.md)
    embedding = clamped["encoder-head256-r3"]
    assert (embedding["tile_size"], embedding["launch_num_warps"], embedding["launch_num_stages"]) == (16, 4, 1), embedding
    # BERT's head 64: vLLM's own BLOCK 64 fits, but the ranked configurations take BLOCK 32 at vLLM's 4 warps
    # (17x faster on the Turing proxy, docs/clamp.md), and the build proves that launch
    bert = clamped["encoder-head64-r1"]
    assert (bert["tile_size"], bert["num_warps"], bert["launch_num_stages"]) == (32, 4, 1), bert
    sm86_clamped = {row["layer"]: row for row in sm86["launches"] if row["model"] == "encoder"}
    head512 = sm86_clamped["encoder-head512-r8"]
    assert (head512["tile_size"], head512["launch_num_warps"], head512["launch_num_stages"]) == (32, 4, 2), head512
    verdicts = {(v["cc"], v["attention"], v["head_size"], v["queries_per_kv"]) for v in fit_table["verdicts"]}
    assert {(cc, s.attention, s.head_size, s.queries_per_kv) for s in ENCODER_SHAPES for cc in (75, 86)} <= verdicts


TURING_AND_AMPERE = (((7, 5), SM75_LIMIT), ((8, 6), AMPERE.limit))


@pytest.mark.parametrize("folder, models", [(ENCODERS, family_configs.ENCODER_MODELS),
                                            (HYBRIDS, family_configs.HYBRID_MODELS)], ids=["encoders", "hybrids"])
def test_embeddinggemma_bert_and_hybrid_configs_fit_at_preflight_from_the_table_on_sm75_and_sm86(
        run_in_image, folder, models):
    code, out, err = run_in_image(f"{EMPTY_CACHE}\n{preflight_each(folder, TURING_AND_AMPERE)}\n{COMPILED_KERNELS}")
    assert code == 0, err[-2000:]
    answers = [json.loads(line) for line in out.splitlines()]
    assert {name for name, *_ in answers} == set(models) and len(answers) == 2 * len(models)
    for name, cc, status, message in answers:
        assert status == "pass" and "from the fit table's verdicts, nothing compiled" in message, (name, cc, message)
    assert cubins(err) == [], cubins(err)


def test_an_unclamped_encoder_kernel_fails_the_check_naming_the_launch(run_in_image):
    config = f"{ENCODERS}/embeddinggemma-300m/config.json"
    code, out, err = run_in_image(f"{STRIP_ENCODER}\npython3 -m patches.fitcheck --device sm75 --model-config {config}")
    assert code == 1, err[-2000:]
    failures = not_fitting(err)
    assert failures and all("_fwd_kernel encoder, BLOCK_N 64" in line and f"needs {ENCODER_HEAD256_SM75} bytes" in line
                            for line in failures), failures


TP_PREFLIGHT = r"""
python3 - <<'PY'
import json
from contract.model_config import parse_config
from entrypoint.checks.clamp import start_fit
config = "/models/gemma-4-12B-it/config.json"
for tp in (1, 2, 4):
    result = start_fit(config, parse_config(json.load(open(config))), (7, 5), 65536, tensor_parallel=tp)()
    print(json.dumps([tp, result.status.value, result.message]))
PY
"""


def test_the_preflight_answers_each_tensor_parallel_size_from_the_table(run_in_image):
    # The 12B's one global KV head is replicated at TP 2 and 4 (16:1 per model, 8:1 and 4:1 per rank):
    # the build proved those per-rank shapes, so the preflight answers every size without compiling.
    code, out, err = run_in_image(f"{EMPTY_CACHE}\n{TP_PREFLIGHT}\n{COMPILED_KERNELS}")
    assert code == 0, err[-2000:]
    for tp, status, message in map(json.loads, out.splitlines()):
        assert status == "pass" and "nothing compiled" in message, (tp, message)
    assert cubins(err) == [], cubins(err)


# Hybrid (attention + Mamba-2) models: their mixers' kernels proven by the build beside their attention.
def test_the_build_proved_every_hybrids_mixer_and_attention_on_sm75_and_sm86(image, docker_client):
    from patches.fitcheck.families.mamba2 import BUILTIN_HYBRIDS
    from patches.fitcheck.attention import HYBRID_BLOCK_SIZE

    sm75, sm86, fit_table = build_reports(docker_client, image)
    kernels = {"_causal_conv1d_fwd_kernel", "_chunk_cumsum_fwd_kernel", "_chunk_state_fwd_kernel",
               "_state_passing_fwd_kernel", "_bmm_chunk_fwd_kernel", "_chunk_scan_fwd_kernel",
               "_store_prefill_checkpoint_kernel", "_causal_conv1d_update_kernel", "_selective_scan_update_kernel",
               # ReplaySSM's decode (--use-replayssm)
               "_replayssm_output_only_precompute_kernel", "_replayssm_output_only_kernel"}
    for report in (sm75, sm86):
        assert report["all_fit"] is True
        for name in BUILTIN_HYBRIDS:
            mixer = [row for row in report["mixer_launches"] if row["model"] == name]
            assert {row["kernel"] for row in mixer} >= kernels and all(row["fits"] for row in mixer), name
            tuned = [row for row in mixer if row["autotune"]]
            assert len(tuned) == 5 and all(row["autotune"]["fitting_config"] is not None for row in tuned), name
            # the attention layer at both launch block sizes: the same need, pair by pair
            attention = [row for row in report["launches"] if row["model"] == name]
            pairs = {}
            for row in attention:
                pairs.setdefault((row["kind"], row["query_len"], row["kernel"], row["path"]), []).append(row["shared"])
            assert pairs and all(len(needs) == 2 and needs[0] == needs[1] for needs in pairs.values()), (name, pairs)
    mixers = {(v["cc"], v["head_dim"], v["state_size"], v["chunk_size"]) for v in fit_table["mixer_verdicts"]
              if v["mixer"] == "mamba2"}
    assert {(cc, c.get("mamba_head_dim") or c.get("mamba_d_head") or c.get("mamba_headdim"),
             c.get("ssm_state_size") or c.get("mamba_d_state"), c.get("chunk_size") or c.get("mamba_chunk_size"))
            for c in BUILTIN_HYBRIDS.values() for cc in (75, 86)} <= mixers
    assert {v["cc"] for v in fit_table["verdicts"] if v["block_size"] == HYBRID_BLOCK_SIZE} == {75, 86}



BF16_REPORT = ("python3 -c 'import json; from contract.clamp_paths import FIT_REPORT_SM86_BF16, read_report; "
               "print(json.dumps(read_report(FIT_REPORT_SM86_BF16)))'")
SAME_LAUNCH = ("model", "layer", "kind", "query_len", "num_seqs", "kernel", "path")
LAUNCH_CONFIG = ("tile_size", "block_m", "launch_num_warps", "launch_num_stages")


def test_the_build_proved_every_shape_on_sm86_in_bf16_too_and_the_table_answers_bf16(image, docker_client,
                                                                                     run_in_image):
    # An RTX 3090 runs a bf16 checkpoint in bf16 (a T4 casts it to fp16): the build records the same
    # matrix on sm_86 in bf16, and the fit table holds its entries and verdicts under that dtype.
    _, sm86, fit_table = build_reports(docker_client, image)
    code, out, err = run_in_image(BF16_REPORT)
    assert code == 0, err[-2000:]
    bf16 = json.loads(out)
    assert bf16["all_fit"] is True and bf16["dtype"] == "bfloat16" and sm86["dtype"] == "float16"
    assert bf16["device"] == sm86["device"]
    pairs = list(zip(sm86["launches"], bf16["launches"]))
    assert len(pairs) == len(bf16["launches"]) and all(
        [half[k] for k in SAME_LAUNCH] == [brain[k] for k in SAME_LAUNCH] for half, brain in pairs)
    # The ranking picks per dtype, so the tiles may differ between the two; where a launch is
    # configured alike, its need is the same.
    alike = [(half, brain) for half, brain in pairs if [half[k] for k in LAUNCH_CONFIG] == [brain[k] for k in LAUNCH_CONFIG]]
    assert alike and all(half["shared"] == brain["shared"] for half, brain in alike)
    assert [row["shared"] for row in sm86["mixer_launches"]] == [row["shared"] for row in bf16["mixer_launches"]]
    verdicts = {name: {(v["cc"], v["dtype"]) for v in fit_table[name]} for name in ("verdicts", "mixer_verdicts")}
    assert all({(86, "bfloat16"), (86, "float16"), (75, "float16")} <= found for found in verdicts.values()), verdicts
    assert (75, "bfloat16") not in verdicts["verdicts"]
    entries = {(e["cc"], e["path"], e["dtype"]) for e in fit_table["entries"]}
    assert {(86, path, "bfloat16") for path in ("2d", "3d", "encoder")} <= entries, entries


MAMBA1_KERNELS = {"_causal_conv1d_fwd_kernel", "_causal_conv1d_update_kernel", "_selective_scan_update_kernel"}


def test_the_build_proved_every_mamba1_and_pure_mamba2_model_on_sm75_and_sm86_whatever_its_channels(image,
                                                                                                    docker_client):
    from patches.fitcheck.families.mamba1 import BUILTIN_MAMBA1, MAMBA1_FIELDS
    from patches.fitcheck.families.mamba2 import BUILTIN_STATE_SPACE_MAMBA2

    sm75, sm86, fit_table = build_reports(docker_client, image)
    for report in (sm75, sm86):
        assert report["all_fit"] is True
        for name, config in {**BUILTIN_MAMBA1, **BUILTIN_STATE_SPACE_MAMBA2}.items():
            needs = {}
            for ranks in ("", "-tp2", "-tp4"):
                rows = [row for row in report["mixer_launches"] if row["model"] == name + ranks]
                assert rows and all(row["fits"] for row in rows), (name + ranks, report["device"])
                needs[ranks] = sorted((row["kind"], row["kernel"], row["shared"]) for row in rows)
            if config["model_type"] != "mamba2":
                assert {kernel for _, kernel, _ in needs[""]} == MAMBA1_KERNELS, needs[""]
            # a rank's share of the channels only sets the grid: the same need on every rank
            assert needs[""] == needs["-tp2"] == needs["-tp4"], (report["device"]["name"], name, needs)
        attention = {row["model"] for row in report["launches"]}
        assert "jamba-v0.1" in attention and not {"falcon-mamba-7b", "mamba-2.8b", "mamba-codestral-7b"} & attention
    mamba1 = {(v["cc"],) + tuple(v[k] for k in MAMBA1_FIELDS) for v in fit_table["mixer_verdicts"]
              if v["mixer"] == "mamba1"}
    assert mamba1 == {(cc, "mamba1", 16, 4) for cc in (75, 86)}


def rank_needs(report: dict, name: str) -> dict:
    """{"", "-tp2", "-tp4": sorted (kind, kernel, shared) of the built-in model's mixer rows}, each row fitting."""
    needs = {}
    for ranks in ("", "-tp2", "-tp4"):
        rows = [row for row in report["mixer_launches"] if row["model"] == name + ranks]
        assert rows and all(row["fits"] for row in rows), (name + ranks, report["device"])
        needs[ranks] = sorted((row["kind"], row["kernel"], row["shared"]) for row in rows)
    return needs


def test_the_build_proved_lfm2s_short_convolutions_on_sm75_and_sm86_and_latent_attention_on_sm86(image,
                                                                                                 docker_client):
    from patches.fitcheck.families.mla import BUILTIN_MLA, MLA_FIELDS
    from patches.fitcheck.families.short_conv import BUILTIN_SHORT_CONV, SHORT_CONV_FIELDS

    sm75, sm86, fit_table = build_reports(docker_client, image)
    for report in (sm75, sm86):
        assert report["all_fit"] is True
        for name in BUILTIN_SHORT_CONV:
            needs = rank_needs(report, name)
            assert {kernel for _, kernel, _ in needs[""]} == {"_causal_conv1d_fwd_kernel", "_causal_conv1d_update_kernel"}
            assert needs[""] == needs["-tp2"] == needs["-tp4"], (report["device"]["name"], name, needs)
            assert any(row["model"] == name for row in report["launches"])  # its attention layers too
    for name in BUILTIN_MLA:  # one need whatever a rank's heads (16 ... 128 over tensor parallel 1, 2, 4)
        needs = rank_needs(sm86, name)
        assert {kernel for _, kernel, _ in needs[""]} == {"_fwd_grouped_kernel_stage1", "_fwd_kernel_stage2"}
        assert needs[""] == needs["-tp2"] == needs["-tp4"], (name, needs)
        assert not any(row["model"].startswith(name) for row in sm75["mixer_launches"])  # refused below 8.0
    convs = {(v["cc"], v["dtype"]) + tuple(v[k] for k in SHORT_CONV_FIELDS) for v in fit_table["mixer_verdicts"]
             if v["mixer"] == "short_conv"}
    assert convs == {(75, "float16", "short_conv", 3), (86, "float16", "short_conv", 3),
                     (86, "bfloat16", "short_conv", 3)}
    mla = {(v["cc"], v["dtype"]) + tuple(v[k] for k in MLA_FIELDS) for v in fit_table["mixer_verdicts"]
           if v["mixer"] == "mla"}
    assert mla == {(86, "float16", "mla", 512, 64), (86, "bfloat16", "mla", 512, 64)}


MLA_ON_SM75 = r"""
python3 - <<'PY'
import json
from patches.fitcheck import families, op_recording
from patches.fitcheck.families.mla import MlaShape
from contract.devices import DEVICES
cc, limit = DEVICES["sm75"]
shape = MlaShape("deepseek-v2-lite", 16, 512, 64)
rows = [(launch.kernel_name, result.shared) for launch, result, _ in
        op_recording.judged(families.record(shape, cc, limit, "float16"), cc, limit, 2)]
print(json.dumps([limit, rows]))
PY
"""


def test_latent_attention_is_refused_on_turing_because_its_decode_does_not_fit_and_at_preflight_in_one_line(
        run_in_image):
    code, out, err = run_in_image(MLA_ON_SM75)
    assert code == 0, err[-2000:]
    limit, rows = json.loads(out)
    # TRITON_MLA's decode at latent rank 512 + rope 64, compiled for sm_75 by the image's Triton
    assert dict(rows)["_fwd_grouped_kernel_stage1"] > limit, rows
    code, out, err = run_in_image(f"{EMPTY_CACHE}\n{preflight_each(MLA_MODELS, TURING_AND_AMPERE)}\n{COMPILED_KERNELS}")
    assert code == 0, err[-2000:]
    answers = {(name, tuple(cc)): (status, message) for name, cc, status, message in map(json.loads, out.splitlines())}
    assert {name for name, _ in answers} == set(family_configs.MLA_MODELS) and len(answers) == 4
    for (name, cc), (status, message) in answers.items():
        if cc == (7, 5):
            assert status == "fail" and "needs compute capability 8.0" in message, (name, message)
        else:
            assert status == "pass" and "from the fit table's verdicts, nothing compiled" in message, (name, message)
    assert cubins(err) == [], cubins(err)


GDN_KERNELS = {"_causal_conv1d_fwd_kernel", "_fused_post_conv_kernel", "chunk_local_cumsum_scalar_kernel",
               "chunk_scaled_dot_kkt_fwd_kernel", "merge_16x16_to_64x64_inverse_kernel", "recompute_w_u_fwd_kernel",
               "chunk_gated_delta_rule_fwd_kernel_h_blockdim64", "chunk_fwd_kernel_o",
               "fused_sigmoid_gating_delta_rule_update_kernel", "_causal_conv1d_update_kernel",
               "fused_recurrent_gated_delta_rule_packed_decode_kernel", "layer_norm_fwd_kernel"}


def test_the_build_proved_every_gated_delta_net_on_sm75_and_sm86_whatever_its_head_counts(image, docker_client):
    from patches.fitcheck.families.gated_delta_net import BUILTIN_GDN, GDN_FIELDS

    sm75, sm86, fit_table = build_reports(docker_client, image)
    for report in (sm75, sm86):
        assert report["all_fit"] is True
        for name in BUILTIN_GDN:
            needs = {}
            for ranks in ("", "-tp2", "-tp4"):
                rows = [row for row in report["mixer_launches"] if row["model"] == name + ranks]
                assert {row["kernel"] for row in rows} == GDN_KERNELS and all(row["fits"] for row in rows), name + ranks
                tuned = [row for row in rows if row["autotune"]]
                assert len(tuned) == 6 and all(row["autotune"]["fitting_config"] is not None for row in tuned), name
                by_kernel = {}
                for row in rows:
                    by_kernel.setdefault((row["kind"], row["kernel"]), []).append(row["shared"])
                needs[ranks] = {key: sorted(shared) for key, shared in by_kernel.items()}
            # a rank's head counts (16/32, 8/16, 4/8 ...) reach the kernels as offsets only: the same
            # need per kernel, which is why a verdict leaves them out of its key (GDN_FIELDS)
            assert needs[""] == needs["-tp2"] == needs["-tp4"], (report["device"]["name"], name, needs)
    gdn = {(v["cc"],) + tuple(v[k] for k in GDN_FIELDS) for v in fit_table["mixer_verdicts"]
           if v["mixer"] == "gated_delta_net"}
    # the state takes the model's dtype unless the config names one (Qwen3.5 27B: fp32); the bf16 pass
    # on sm_86 gives the other two a bf16 state
    assert {(cc, "gated_delta_net", 128, 128, 4, state, interleaved) for cc in (75, 86)
            for state, interleaved in (("float16", True), ("float16", False), ("float32", False))} | {
        (86, "gated_delta_net", 128, 128, 4, "bfloat16", interleaved) for interleaved in (True, False)} == gdn

MIXER_AT_LIMIT = r"""
python3 - <<'PY'
import json
from patches.fitcheck import compiler, op_recording, fit_report as report
from patches.fitcheck.families.mamba2 import BUILTIN_HYBRIDS
from contract.model_config import parse_config
from patches.fitcheck.families import mixer_from_config, record
shape = mixer_from_config(parse_config(BUILTIN_HYBRIDS["granite-4.0-h-tiny"], "built-in"), "granite", "built-in")
with compiler.compile_mode(compiler.default_mode()):
    rows = [dict(report.launch_row(l, r, %d), autotune=a)
            for l, r, a in op_recording.judged(record(shape, 75, 65536, "float16"), 75, %d)]
built = report.build_report(versions={"vllm": "", "triton": ""}, device={"name": "sm75", "cc": 75, "limit": %d},
                            launches=[], unpatched=None, elapsed_s=0, mixers=rows)
print(json.dumps({"all_fit": built["all_fit"], "failures": report.failures(built), "rows": rows}))
PY
"""


def test_a_mixer_kernel_no_configuration_of_which_fits_fails_naming_it(run_in_image):
    # At a forced 12,288-byte limit every configuration of the chunk scan is too large (its smallest
    # needs 16,384 B on sm_75), while the SSD's other kernels and the plain launches fit.
    limit = 12288
    report, _ = passing_report(run_in_image, MIXER_AT_LIMIT % (limit, limit, limit))
    assert report["all_fit"] is False
    scan = next(row for row in report["rows"] if row["kernel"] == "_chunk_scan_fwd_kernel")
    assert scan["autotune"]["fitting_config"] is None and scan["autotune"]["compiled"] == scan["autotune"]["configs"]
    assert len(report["failures"]) == 1 and "_chunk_scan_fwd_kernel, none of its 23 autotune configurations fits" in \
        report["failures"][0] and f"limit {limit}" in report["failures"][0], report["failures"]
    assert all(row["fits"] for row in report["rows"] if row["kernel"] != "_chunk_scan_fwd_kernel")



# The six checks in one process (vLLM imported once, not six times): each check's report as its
# --json prints it, by model and mode.
QUICK_VS_FULL = r"""
cd /tmp && python3 - <<'PY'
import json
from patches.fitcheck.__main__ import parse
from patches.fitcheck.proof import plan, run
reports = {}
for config in ("/models/gemma-4-e2b-like", "%s/embeddinggemma-300m", "%s/nemotron-h-8b"):
    for mode, flags in (("shared-only", []), ("full", ["--full-compile"])):
        options, _ = parse(["--device", "sm75", "--model-config", config + "/config.json", "--compare-unpatched",
                            *flags])
        reports[f"/tmp/{config.rsplit('/', 1)[-1]}.{mode}.json"] = run(plan(options))
print(json.dumps(reports))
PY
""" % (ENCODERS, HYBRIDS)
ROW_FIGURES = ("kernel", "path", "query_len", "tile_size", "shared", "num_warps", "num_stages", "fits", "error")


def test_the_shared_memory_only_compile_gives_every_row_what_the_full_compile_gives(run_in_image):
    # Decoder (heads 256 and 512), encoder and Mamba-2 mixer launches, patched and unpatched: every
    # row's figures are the same whether Triton stops after allocating shared memory or makes a cubin.
    reports, _ = passing_report(run_in_image, QUICK_VS_FULL)
    assert len(reports) == 6
    for model in ("gemma-4-e2b-like", "embeddinggemma-300m", "nemotron-h-8b"):
        quick, full = reports[f"/tmp/{model}.shared-only.json"], reports[f"/tmp/{model}.full.json"]
        assert quick["compile"]["mode"] == "shared-only" and full["compile"] == {"mode": "full", "cross_checked": []}
        assert quick["launches"] and quick["unpatched"], model
        for part in ("launches", "unpatched", "mixer_launches"):
            rows = [[row[k] for k in ROW_FIGURES] for row in quick[part]]
            assert rows == [[row[k] for k in ROW_FIGURES] for row in full[part]], (model, part)
        kernels = {row["kernel"] for row in quick["launches"] + quick["unpatched"] + quick["mixer_launches"]}
        checked = {entry["kernel"]: entry["shared"] for entry in quick["compile"]["cross_checked"]}
        assert set(checked) == kernels, (model, checked)
        assert all(checked[kernel] == max(row["shared"] for row in quick["launches"] + quick["unpatched"] +
                                          quick["mixer_launches"] if row["kernel"] == kernel)
                   for kernel in checked)
    assert {row["path"] for row in reports["/tmp/embeddinggemma-300m.shared-only.json"]["launches"]} == {"encoder"}
    assert reports["/tmp/nemotron-h-8b.shared-only.json"]["mixer_launches"]


DRIFTED_TRITON = r"""
export TRITON_CACHE_DIR=$(mktemp -d)
python3 - <<'PY'
import sys
from patches.fitcheck import compiler
from patches.fitcheck.__main__ import main

real = compiler._allocate_shared_memory


def standin_triton_whose_full_pipeline_differs(module, metadata, *args):
    llir = real(module, metadata, *args)
    metadata["shared"] += 16
    return llir


compiler._allocate_shared_memory = standin_triton_whose_full_pipeline_differs
sys.exit(main(["--device", "sm75", "--model-config", "/models/gemma-4-e2b-like/config.json", "--json"]))
PY
"""


def test_a_shared_memory_figure_the_full_compile_does_not_confirm_fails_naming_the_kernel(run_in_image):
    code, out, err = run_in_image(DRIFTED_TRITON)
    assert code == 2 and out == "", err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("fitcheck:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    quick, full = (int(n) for n in re.findall(r"says (\d+) bytes, Triton's full compile (\d+) bytes", lines[0])[0])
    assert lines[0].startswith("fitcheck: kernel_unified_attention (cc 75): ") and quick == full + 16, lines
    assert "--full-compile" in lines[0]


CUT_REFUSED = r"""
export TRITON_CACHE_DIR=$(mktemp -d)
python3 - <<'PY'
import sys
from patches.fitcheck import compiler
from patches.fitcheck.__main__ import main


def standin_triton_that_refuses_the_cut(module, metadata, *args):
    raise TypeError("add_allocate_shared_memory_nv(): incompatible function arguments")


compiler._allocate_shared_memory = standin_triton_that_refuses_the_cut
sys.exit(main(["--device", "sm75", "--model-config", "/models/gemma-4-e2b-like/config.json", "--json"]))
PY
"""


def test_a_triton_that_refuses_the_pipeline_cut_still_gets_every_number_from_full_compiles(run_in_image):
    report, _ = passing_report(run_in_image, CUT_REFUSED)
    assert report["all_fit"] is True and report["max_shared"] == SM75_LIMIT
    assert report["launches"] and all(row["error"] is None and row["shared"] is not None for row in report["launches"])
    assert {row["head_size"] for row in report["launches"]} == {256, 512}
