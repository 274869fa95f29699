"""The front-end records (patches/fitcheck/frontend.py): what decides a reuse (pure parts; the image
tier compiles with the real Triton and holds a reused front end equal to a fresh one)."""
from types import SimpleNamespace

import pytest

from patches.fitcheck import compiler, frontend


def dot_size(target):
    def check(lhs, rhs):  # like Triton 3.8's min_dot_size: the target is not read
        return (1, 1, 16)
    return check


def capability_reader(capability):
    def convert(value):
        return value + capability
    return convert


def test_a_function_is_the_same_code_only_with_the_same_closure_values():
    assert frontend.code_identity(dot_size("sm75")) == frontend.code_identity(dot_size("sm86"))
    assert frontend.code_identity(capability_reader(75)) != frontend.code_identity(capability_reader(80))
    assert frontend.code_identity(capability_reader(75)) == frontend.code_identity(capability_reader(75))
    assert frontend.code_identity(dot_size(0)) != frontend.code_identity(capability_reader(0))


def test_the_front_ends_view_of_the_options_notes_each_read_and_refuses_writes():
    read = frontend._ReadOptions(SimpleNamespace(debug=False, supported_fp8_dtypes=("fp8e5",)))
    assert read.debug is False and read.supported_fp8_dtypes == ("fp8e5",)
    with pytest.raises(AttributeError):
        read.instrumentation_mode  # noqa: B018
    assert getattr(read, "arch", "default") == "default"
    assert read.reads == {"debug": "False", "supported_fp8_dtypes": "('fp8e5',)",
                          "instrumentation_mode": frontend._ABSENT, "arch": frontend._ABSENT}
    with pytest.raises(AttributeError):
        read.debug = True


def record(**options):
    return {"options": {name: repr(value) for name, value in options.items()},
            "calls": {"min_dot_size": frontend.code_identity(dot_size("sm75"))}, "module_map": {}}


@pytest.mark.parametrize("options, codegen, reused", [
    (dict(debug=False, arch="sm86"), {"min_dot_size": dot_size("sm86")}, True),  # an option not read may differ
    (dict(debug=True), {"min_dot_size": dot_size("sm86")}, False),  # an option read differs
    (dict(), {"min_dot_size": dot_size("sm86")}, False),  # an option read is absent here
    (dict(debug=False), {"min_dot_size": capability_reader(86)}, False),  # another function by that name
    (dict(debug=False), {}, False),  # no function by that name
])
def test_a_record_is_reused_only_where_every_read_and_call_would_be_the_same(options, codegen, reused):
    assert frontend.matches(record(debug=False), SimpleNamespace(**options), codegen, {}) is reused


class Source:
    def __init__(self, digest):
        self.digest = digest

    def hash(self):
        return self.digest


def test_the_front_end_runs_once_per_source_and_reads_then_reuses_its_record(tmp_path, monkeypatch):
    monkeypatch.setattr(frontend, "_FOLDER", [tmp_path])
    monkeypatch.setattr(frontend, "_parsed", lambda text, context, folder: ("parsed", text, context))
    runs = []

    def run(target, options, codegen_fns, module_map, context):
        runs.append(target)
        codegen_fns["min_dot_size"](None, None)
        return f"ttir of {options.debug} for {target}"

    sm75 = SimpleNamespace(debug=False, arch="sm75")
    codegen = {"min_dot_size": dot_size("sm75"), "convert_custom_types": capability_reader(75)}
    assert frontend.front_end(Source("a"), run, "sm75", sm75, codegen, {}, "c1") == "ttir of False for sm75"
    sm86 = SimpleNamespace(debug=False, arch="sm86")
    codegen86 = {"min_dot_size": dot_size("sm86"), "convert_custom_types": capability_reader(86)}
    # convert_custom_types was not called, arch not read: the record holds for sm_86
    assert frontend.front_end(Source("a"), run, "sm86", sm86, codegen86, {}, "c2") == ("parsed", "ttir of False for sm75", "c2")
    assert frontend.front_end(Source("a"), run, "sm86", SimpleNamespace(debug=True), codegen86, {}, "c3") == "ttir of True for sm86"
    assert frontend.front_end(Source("b"), run, "sm86", sm86, codegen86, {}, "c4") == "ttir of False for sm86"
    assert runs == ["sm75", "sm86", "sm86"]


def test_the_first_job_of_each_source_goes_ahead_of_the_rest_in_order():
    jobs = [SimpleNamespace(source=Source(digest), name=name)
            for digest, name in [("a", "a-4w"), ("a", "a-8w"), ("b", "b-4w"), ("a", "a-2w"), ("c", "c"), ("b", "b-8w")]]
    assert [job.name for job in compiler.firsts_first(jobs)] == ["a-4w", "b-4w", "c", "a-8w", "a-2w", "b-8w"]


def test_without_a_writable_temporary_folder_every_compile_runs_its_own_front_end(tmp_path, monkeypatch):
    monkeypatch.setattr(frontend, "_FOLDER", [])
    not_a_folder = tmp_path / "tmp"
    not_a_folder.write_text("")  # TMPDIR naming a file: mkdtemp fails as on a root nobody may write
    monkeypatch.setattr(frontend.tempfile, "mkdtemp", lambda prefix: (not_a_folder / prefix).mkdir() or "")
    assert frontend.start() is None
    runs = []
    run = lambda target, options, codegen_fns, module_map, context: runs.append(target) or f"ttir for {target}"  # noqa: E731
    for target in ("sm75", "sm75"):
        assert frontend.front_end(Source("a"), run, target, SimpleNamespace(), {}, {}, None) == f"ttir for {target}"
    assert runs == ["sm75", "sm75"]
