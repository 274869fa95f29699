"""contract/compile_record.py and its two users: the fit check's compiler, which takes a record's answers
instead of compiling the same Triton cache keys (and still confirms each kernel's largest need in full),
and build.py, which writes a build's record back to the repository. The real compiles run in every image
build; here a standin stands for Triton's compile, which a host without vLLM cannot run."""
import gzip
import json
import string
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract import compile_record
from contract.compile_record import Answer, Record
from door.problem import Problem, UsageError
from patches.fitcheck import compiler

VERSIONS = {"vllm": "0.33.0", "triton": "3.8.0"}
CUT = compiler.SHARED_ONLY_KEY

keys = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
answers = st.one_of(
    st.builds(Answer, kernel=st.sampled_from(["kernel_unified_attention", "reduce_segments", "_fwd_kernel"]),
              cc=st.sampled_from([75, 86, 90]), shared=st.integers(0, 2**20), num_warps=st.sampled_from([None, 2, 4, 8]),
              num_stages=st.sampled_from([None, 1, 2, 3]), error=st.none()),
    st.builds(Answer, kernel=st.just("kernel_unified_attention"), cc=st.just(75), shared=st.none(),
              num_warps=st.none(), num_stages=st.none(), error=st.text(min_size=1, max_size=40)))


@given(st.dictionaries(keys, answers, max_size=20))
def test_a_rendered_record_reads_back_the_same_and_renders_to_the_same_bytes(recorded):
    text = compile_record.render(recorded, VERSIONS, CUT)
    record = compile_record.parse_record(text)
    assert record == Record("0.33.0", "3.8.0", CUT, recorded)
    assert compile_record.text_of(record) == text
    assert text.count("\n") == len(recorded) + 2 + (not recorded), "one compile per line"


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                      max_size=4), max_leaves=12)


def mutated_documents():
    good = {"format": 1, "vllm_version": "0.33.0", "triton_version": "3.8.0", "cut": CUT,
            "compiles": {"a" * 64: ["kernel_unified_attention", 75, 32768, 4, 1, None]}}
    paths = [("format",), ("vllm_version",), ("cut",), ("compiles",), ("compiles", "a" * 64)] + \
            [("compiles", "a" * 64, i) for i in range(6)]

    def mutate(path, value):
        document = json.loads(json.dumps(good))
        holder = document
        for step in path[:-1]:
            holder = holder[step]
        holder[path[-1]] = value
        return document
    return st.builds(mutate, st.sampled_from(paths), json_values)


@settings(max_examples=300)
@given(st.one_of(json_values, mutated_documents(), st.text(max_size=60)))
def test_any_document_is_a_record_or_one_line_saying_what_is_wrong(document):
    text = document if isinstance(document, str) else json.dumps(document)
    try:
        record = compile_record.parse_record(text)
    except ValueError as error:
        assert "\n" not in str(error) and len(str(error)) < 300
        return
    for answer in record.answers.values():  # what it holds is what the compiler can take
        assert (answer.error is None) != (answer.shared is None)
        assert all(v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)
                   for v in (answer.shared, answer.num_warps, answer.num_stages))


def test_a_key_that_is_not_a_cache_key_or_a_bad_field_is_refused_by_name():
    good = ["kernel_unified_attention", 75, 32768, 4, 1, None]
    for compiles, says in [({"A" * 64: good}, "sha256"), ({"a" * 63: good}, "sha256"),
                           ({"a" * 64: good[:5]}, "expected [kernel"),
                           ({"a" * 64: ["x; rm -rf /", 75, 1, 4, 1, None]}, "not a kernel name"),
                           ({"a" * 64: ["k", 7.5, 1, 4, 1, None]}, "compute capability"),
                           ({"a" * 64: ["k", 75, True, 4, 1, None]}, "shared is True"),
                           ({"a" * 64: ["k", 75, -1, 4, 1, None]}, "shared is -1"),
                           ({"a" * 64: ["k", 75, 1, 4, 1, "OutOfResources"]}, "not both or neither"),
                           ({"a" * 64: ["k", 75, None, None, None, None]}, "not both or neither")]:
        document = {"format": 1, "vllm_version": "0.33.0", "triton_version": "3.8.0", "cut": CUT, "compiles": compiles}
        with pytest.raises(ValueError, match=says.replace("[", r"\[")):
            compile_record.parse_record(json.dumps(document))


def test_reading_names_the_file_and_says_what_to_do(tmp_path):
    assert compile_record.read_record(tmp_path / "vllm-0.33.0.json") is None
    for name, content in [("cut.json", b'{"format": 1, "vllm_ver'), ("binary.json", b"\xff\xfe\x00"),
                          ("old.json", b'{"format": 0}')]:
        (tmp_path / name).write_bytes(content)
        with pytest.raises(UsageError) as refused:
            compile_record.read_record(tmp_path / name)
        line = str(refused.value)
        assert line.startswith(str(tmp_path / name)) and "git checkout" in line and "\n" not in line
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(UsageError, match="cannot read the compile record"):
        compile_record.read_record(tmp_path / "folder.json")


def test_a_record_of_another_triton_vllm_or_cut_answers_nothing_and_says_why():
    record = Record("0.33.0", "3.8.0", CUT, {"a" * 64: Answer("k", 75, 1, 4, 1)})
    assert compile_record.usable_answers(record, VERSIONS, CUT) == (record.answers, None)
    for versions, cut, says in [({"vllm": "0.33.0", "triton": "3.9.0"}, CUT, "Triton 3.9.0"),
                                ({"vllm": "0.34.0", "triton": "3.8.0"}, CUT, "vLLM 0.34.0"),
                                (VERSIONS, CUT + "-2", CUT + "-2")]:
        found, why = compile_record.usable_answers(record, versions, cut)
        assert found == {} and "running" in why and says in why.split("running")[1]
    assert compile_record.usable_answers(None, VERSIONS, CUT) == ({}, "no record for this vLLM release")


# The compiler's side: a standin for Triton's JIT preparation and its compile (a host without vLLM has neither).

TRITONS_CACHE_KEY = compiler._shared_only_cache_key


def standin_job(name: str, cc: int, case=None):
    source = SimpleNamespace(fn=SimpleNamespace(__name__="kernel_unified_attention"), name=name)
    return compiler._Job(source, {"num_warps": 4}, f"{cc}:{name}", SimpleNamespace(arch=cc), case)


@pytest.fixture
def standin_compiler(monkeypatch):
    compiled = []
    monkeypatch.setattr(compiler, "_target_and_backend", lambda cc: (SimpleNamespace(arch=cc), None))
    monkeypatch.setattr(compiler, "_prepare", lambda request, target, backend: standin_job(request.fn, target.arch, request.case))
    monkeypatch.setattr(compiler, "_shared_only_cache_key", lambda source, options, backend: (source.name * 64)[:64])

    def standin_compile_jobs(jobs, workers):
        compiled.append([job.source.name for job in jobs])
        return [compiler.CompileResult(1000 * (ord(job.source.name) - 96), 4, 1) for job in jobs]
    monkeypatch.setattr(compiler, "_compile_jobs", standin_compile_jobs)
    for name, value in (("_DONE", {}), ("_WITNESSES", {}), ("LEDGER", []), ("_RECORD", {}), ("RECORDABLE", {})):
        monkeypatch.setattr(compiler, name, value)
    return compiled


def test_the_record_answers_its_keys_the_rest_is_compiled_and_the_largest_need_still_compiled_in_full(standin_compiler):
    compiler.use_record({"c" * 64: Answer("kernel_unified_attention", 75, 50000, 4, 1)})
    with compiler.compile_mode(compiler.SHARED_ONLY):
        results = compiler.compile_launches([("a", {}, {}), ("c", {}, {}), ("b", {}, {}), ("c", {}, {})], 75)
    assert [r.shared for r in results] == [1000, 50000, 2000, 50000]
    assert standin_compiler == [["a", "b"]], "the recorded key is not compiled"
    assert [(entry.mode, entry.kernel) for entry in compiler.LEDGER] == [
        (compiler.RECORDED, "kernel_unified_attention"), (compiler.SHARED_ONLY, "kernel_unified_attention"),
        (compiler.SHARED_ONLY, "kernel_unified_attention")]
    assert {key[0]: a.shared for key, a in compiler.RECORDABLE.items()} == {"a": 1000, "b": 2000, "c": 50000}
    with pytest.raises(Problem, match="says 50000 bytes, Triton's full compile 3000 bytes"):
        compiler.cross_check()  # the standin's full compile of the recorded witness says otherwise
    assert standin_compiler[-1] == ["c"], "the record's largest need is compiled in full"


def test_the_ledger_charges_each_compile_to_the_case_that_asked_for_it_first(standin_compiler):
    compiler.use_record({"c" * 64: Answer("kernel_unified_attention", 75, 50000, 4, 1)})
    with compiler.compile_mode(compiler.SHARED_ONLY):
        compiler.compile_launches([("a", {}, {}, "first"), ("c", {}, {}, "recorded"), ("a", {}, {}, "second")], 75)
        compiler.compile_launches([("b", {}, {}), ("a", {}, {}, "later")], 75)
    assert [(entry.mode, entry.case) for entry in compiler.LEDGER] == [
        (compiler.RECORDED, "recorded"), (compiler.SHARED_ONLY, "first"), (compiler.SHARED_ONLY, None)]
    with pytest.raises(Problem):  # the standin's full compile of "c" says otherwise
        compiler.cross_check()
    assert compiler.LEDGER[-1][::4] == (compiler.FULL, "recorded"), "the witness keeps its case"


def test_a_full_compile_run_takes_nothing_from_the_record(standin_compiler):
    compiler.use_record({"a" * 64: Answer("kernel_unified_attention", 75, 50000, 4, 1)})
    with compiler.compile_mode(compiler.FULL):
        assert [r.shared for r in compiler.compile_launches([("a", {}, {})], 75)] == [1000]
    assert standin_compiler == [["a"]] and compiler.RECORDABLE == {}


# build.py's side: a build's record written back to the repository, only when it changed.

def test_the_build_writes_the_images_record_back_only_when_it_differs(tmp_path):
    from buildtool.image.build import keep_compile_record

    recorded = {"b" * 64: Answer("reduce_segments", 86, 512, 4, 1), "a" * 64: Answer("k", 75, None, None, None, "E")}
    document = json.loads(compile_record.render(recorded, VERSIONS, CUT))
    line = keep_compile_record(document, tmp_path)
    written = tmp_path / "vllm-0.33.0.json"
    assert line == f"{written}: written (2 compiles): commit it, and a fresh host's build takes these compiles from it"
    assert compile_record.read_record(written).answers == recorded
    before = written.stat().st_mtime_ns
    assert keep_compile_record(document, tmp_path) == f"{written}: unchanged (2 compiles)"
    assert written.stat().st_mtime_ns == before
    document["compiles"]["b" * 64][2] = -5
    with pytest.raises(Problem, match="the build's compile record is not one .*shared is -5"):
        keep_compile_record(document, tmp_path)
    assert compile_record.read_record(written).answers == recorded, "a bad record overwrites nothing"


def test_every_committed_record_reads_and_names_its_own_release():
    from buildtool.image.build import COMPILE_RECORDS

    records = sorted(COMPILE_RECORDS.glob("*.json"))
    assert records, "the pinned release has a record"
    for path in records:
        record = compile_record.read_record(path)
        assert path == compile_record.record_path(COMPILE_RECORDS, record.vllm_version)
        assert record.cut == CUT, "a record of another cut pipeline answers nothing: rebuild to refresh it"
        assert path.read_text() == compile_record.text_of(record)
        assert set(string.hexdigits.lower()) >= set("".join(record.answers))


# The fit check's command line: --compile-record, refused in one line before vLLM or Triton load.

@pytest.mark.parametrize("extra, content, says", [
    (["--full-compile"], None, "--compile-record answers compiles cut at the shared-memory allocation"),
    ([], None, "--compile-record {path}: no such file; pass a build's record (the repository keeps them in contract/compile-records/)"),
    ([], b"\x1f\x8b\x08 not gzip", "{path} is not a compile record (EOFError"),
    ([], b'{"format": 1}', "{path} is not a compile record (vllm_version is None"),
])
def test_a_bad_compile_record_option_is_refused_in_one_line(tmp_path, capsys, extra, content, says):
    from patches.fitcheck.__main__ import main

    path = tmp_path / ("record.json.gz" if content and content.startswith(b"\x1f") else "record.json")
    if content is not None:
        path.write_bytes(content)
    code = main(["--device", "sm75", "--matrix", "gemma4", "--compile-record", str(path), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("fitcheck: " + says.format(path=path)) and err.count("\n") == 1, err


def test_the_images_gzipped_record_reads_as_the_plain_one(tmp_path):
    import gzip

    text = compile_record.render({"a" * 64: Answer("k", 75, 1, 4, 1)}, VERSIONS, CUT)
    (tmp_path / "r.json.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "r.json").write_text(text)
    assert compile_record.read_record(tmp_path / "r.json.gz") == compile_record.read_record(tmp_path / "r.json")


def test_a_triton_without_tritons_cache_key_function_compiles_everything_and_records_nothing(standin_compiler,
                                                                                              monkeypatch):
    """A Triton whose compile names its cache otherwise (no get_cache_key) gets "" as every key: nothing is
    answered from a record and nothing kept for one, and every launch is compiled as before."""
    import sys

    monkeypatch.setitem(sys.modules, "triton", SimpleNamespace())
    monkeypatch.setitem(sys.modules, "triton.compiler", SimpleNamespace())
    monkeypatch.setitem(sys.modules, "triton.compiler.compiler", SimpleNamespace())
    monkeypatch.setattr(compiler, "_shared_only_cache_key", TRITONS_CACHE_KEY)
    assert compiler._shared_only_cache_key(SimpleNamespace(), {}, None) == ""
    monkeypatch.setattr(compiler, "_prepare", lambda request, target, backend: compiler._Job(
        SimpleNamespace(fn=SimpleNamespace(__name__="k")), {}, f"{target.arch}:{request.fn}", target))
    compiled = []
    monkeypatch.setattr(compiler, "_compile_jobs", lambda jobs, workers: compiled.extend(job.key for job in jobs) or [
        compiler.CompileResult(1, 4, 1) for _ in jobs])
    compiler.use_record({"a" * 64: Answer("k", 75, 50000, 4, 1)})
    with compiler.compile_mode(compiler.SHARED_ONLY):
        compiler.compile_launches([("a", {}, {}), ("b", {}, {})], 75)
    assert compiled == ["75:a", "75:b"] and compiler.RECORDABLE == {}


@pytest.mark.parametrize("label, found", [("0.33.0", True), ("0.99.0", False), (None, False),
                                          ("0.33.0/../../../compile-records/vllm-0.33.0", False),
                                          ("../compile-records/vllm-0.33.0", False)])
def test_build_py_verify_takes_the_repositorys_record_of_the_images_release_and_only_by_its_number(label, found):
    """`build.py verify IMAGE` reads contract/compile-records/vllm-<the image's vLLM label>.json: a label that is
    no release number (an image's labels are its author's) names no file."""
    from buildtool.image.labels import VLLM_VERSION_LABEL
    from buildtool.image.verify import COMPILE_RECORDS, committed_record

    labels = {VLLM_VERSION_LABEL: label} if label else {}
    standin_client = SimpleNamespace(images=SimpleNamespace(get=lambda ref: SimpleNamespace(labels=labels)))
    record = committed_record(standin_client, "any")
    assert (gzip.decompress(record) == (COMPILE_RECORDS / "vllm-0.33.0.json").read_bytes()) if found else record is None


def test_a_label_that_climbs_out_of_the_records_folder_reads_nothing(tmp_path, monkeypatch):
    from buildtool.image import verify
    from buildtool.image.labels import VLLM_VERSION_LABEL

    (tmp_path / "records" / "vllm-0").mkdir(parents=True)
    (tmp_path / "secret.json").write_text("{}")
    climbing = "0/../../secret"
    assert (tmp_path / "records" / f"vllm-{climbing}.json").read_text() == "{}", "the path reaches the planted file"
    monkeypatch.setattr(verify, "COMPILE_RECORDS", tmp_path / "records")
    standin_client = SimpleNamespace(images=SimpleNamespace(
        get=lambda ref: SimpleNamespace(labels={VLLM_VERSION_LABEL: climbing})))
    assert verify.committed_record(standin_client, "any") is None
