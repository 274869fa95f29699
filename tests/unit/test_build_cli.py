"""build.py's decisions and refusals that need no Docker engine."""
import dataclasses
import io
import json
import os
import subprocess
import sys

import pytest

from buildtool.base.bootstrap import BOOTSTRAP_IMAGE
from buildtool.base.build import after_failed_pull, os_image_step
from buildtool.docker.buildkit import BuildRequest, build_environment, buildx_argv
from buildtool.hostconfig import debian_mirror, host_ca_bundle, pip_index_secrets
from buildtool.build_plans import base_plan, build_plan
from buildtool.image.fit_table import fit_verdict_line
from buildtool.image.labels import base_digest, image_labels
from buildtool.image.verify import clamp_finding, finding_line, fp16_finding, fp16_label_findings
from contract.layout import BUILD_REPORTS
from contract.verdict import Status
from buildtool.docker.progress import ProgressView, failure_line
from tests.support.build_py import build_py as build_module
from tests import REPO
from door.problem import Problem


REPORTS = {
    "versions": {"vllm": "0.33.0", "torch": "2.14.0", "triton": "3.8.0"},
    "clamp": {"patch_version": 1, "sha256_after": "ab" * 32},
    "fit": {"max_shared": 65536, "device": {"name": "sm75", "cc": 75, "limit": 65536}},
    "fit_sm86": {"max_shared": 98304, "device": {"name": "sm86", "cc": 86, "limit": 101376}},
    "fp16": {"outcome": "applied", "patch_version": 1, "sha256_after": "cd" * 32,
             "layers": ["vision_embedder.patch_dense", "vision_embedder.patch_ln2"]},
}


def build_py(*args, env=None):
    return subprocess.run([sys.executable, str(REPO / "build.py"), *args], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_no_engine_is_one_line_and_exit_1():
    run = build_py("verify", "anything", env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert run.returncode == 1
    assert "no Docker engine answered" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_a_missing_ca_bundle_is_bad_input_before_anything_is_built(tmp_path):
    run = build_py("--base", "pypi", "--ca-cert", str(tmp_path / "none.pem"),
                   env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert run.returncode == 2
    assert "argument --ca-cert:" in run.stderr and "none.pem': no such file" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def plan_of(*argv):
    return build_plan(build_module().parse(list(argv)))


def test_the_command_line_becomes_one_frozen_build_plan(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    plan = plan_of("--base", "pypi", "--vllm-version", "0.32.0", "--extras", "audio", "--ca-cert", str(bundle))
    assert (plan.tag, plan.base, plan.extras) == ("vllm-turing:0.32.0", "vllm-turing-base:0.32.0", "audio")
    assert plan.pypi_base.vllm_version == "0.32.0" and plan.pypi_base.tag == plan.base
    assert plan.options.ca_cert == bundle and plan.pypi_base.options is plan.options
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.tag = "other"


@pytest.mark.parametrize("argv, base, tag", [
    ((), "vllm/vllm-openai:v0.33.0", "vllm-turing:0.33.0"),
    (("--base", "mine:1", "--tag", "me/x:2", "--bootstrap"), "mine:1", "me/x:2"),
    (("--base", "pypi", "--base-tag", "b:1"), "b:1", "vllm-turing:0.33.0"),
])
def test_the_plan_names_the_base_and_the_tag(argv, base, tag):
    plan = plan_of(*argv)
    assert (plan.base, plan.tag) == (base, tag)
    assert (plan.pypi_base is not None) == ("pypi" in argv), "only --base pypi builds a base"


def test_unknown_extras_are_refused_by_the_parser():
    run = build_py("--extras", "video")
    assert run.returncode == 2 and "invalid choice: 'video'" in run.stderr


def test_labels_come_from_the_build_reports():
    labels = image_labels(reports=REPORTS, base_ref="vllm-turing-base:0.33.0", base_digest="sha256:1",
                          revision="abc", created="2026-11-30T00:00:00+00:00")
    assert labels["io.vllm-turing.clamp.sha256"] == "ab" * 32
    assert labels["io.vllm-turing.fit.max-shared"] == "65536" and labels["io.vllm-turing.fit.limit"] == "65536"
    assert labels["io.vllm-turing.torch.version"] == "2.14.0"
    assert labels["org.opencontainers.image.base.name"] == "vllm-turing-base:0.33.0"
    assert labels["org.opencontainers.image.version"] == "0.33.0"


def test_the_sm86_fit_report_the_build_writes_is_read_into_labels():
    assert "fit_sm86" in BUILD_REPORTS, "read_build_reports reads every report of contract.layout.BUILD_REPORTS"
    labels = image_labels(reports=REPORTS, base_ref="b", base_digest="sha256:1", revision="abc", created="now")
    assert labels["io.vllm-turing.fit.sm86.max-shared"] == "98304"
    assert labels["io.vllm-turing.fit.sm86.limit"] == "101376"
    assert fit_verdict_line({**REPORTS["fit_sm86"], "launches": [{}] * 3, "all_fit": True}) == \
        "3 launches, max shared 98304 of 101376 bytes on sm86: every launch fits"


def clamp_check_output(outcome: str) -> str:
    return json.dumps({"outcome": outcome, "sha256_after": "ab" * 32, "message": "..."})


@pytest.mark.parametrize("exit_code, outcome, status, name", [
    (0, "present", Status.PASS, "clamp present once"),
    (0, "upstream", Status.PASS, "vLLM sizes attention tiles from shared memory itself (no clamp needed)"),
    (1, "absent", Status.FAIL, "clamp present once"),
    (1, "outdated", Status.FAIL, "clamp present once"),
])
def test_the_clamp_finding_names_what_the_check_proved(exit_code, outcome, status, name):
    finding = clamp_finding(exit_code, clamp_check_output(outcome))
    assert (finding.status, finding.name, finding.message) == (status, name, outcome)
    assert finding_line(finding).startswith("ok   " if status is Status.PASS else "FAIL ")


def test_the_encoder_sites_finding_is_named_for_its_site():
    assert clamp_finding(0, clamp_check_output("present"), "encoder ").name == "encoder clamp present once"
    assert clamp_finding(1, clamp_check_output("absent"), "encoder ").name == "encoder clamp present once"


def test_a_clamp_check_that_printed_no_json_fails_with_its_last_line():
    finding = clamp_finding(2, "Traceback ...\nModuleNotFoundError: No module named 'vllm'\n")
    assert finding.failed and finding.message == "ModuleNotFoundError: No module named 'vllm'" and finding.fix


def test_the_fp16_upcast_report_becomes_labels_and_a_release_without_the_file_says_none():
    labels = image_labels(reports=REPORTS, base_ref="b", base_digest="sha256:1", revision="abc", created="now")
    assert labels["io.vllm-turing.fp16.outcome"] == "applied" and labels["io.vllm-turing.fp16.version"] == "1"
    assert labels["io.vllm-turing.fp16.sha256"] == "cd" * 32
    assert labels["io.vllm-turing.fp16.layers"] == "vision_embedder.patch_dense,vision_embedder.patch_ln2"
    none = {"outcome": "none", "patch_version": 1, "sha256_after": None, "layers": ["x"]}
    labels = image_labels(reports={**REPORTS, "fp16": none}, base_ref="b", base_digest="sha256:1", revision="abc",
                          created="now")
    assert (labels["io.vllm-turing.fp16.sha256"], labels["io.vllm-turing.fp16.layers"]) == ("none", "")


@pytest.mark.parametrize("exit_code, outcome, passes", [
    (0, "present", True), (0, "none", True), (1, "absent", False), (1, "outdated", False), (2, "error", False),
])
def test_the_fp16_finding_passes_only_on_a_present_upcast_or_no_file(exit_code, outcome, passes):
    finding = fp16_finding(exit_code, json.dumps({"outcome": outcome, "sha256_after": "cd" * 32}))
    assert finding.failed is not passes and (passes or "rebuild the image" in finding.fix)


def test_the_fp16_sha256_label_is_held_against_the_file_the_check_read():
    [same] = fp16_label_findings("cd" * 32, json.dumps({"outcome": "present", "sha256_after": "cd" * 32}))
    [changed] = fp16_label_findings("cd" * 32, json.dumps({"outcome": "present", "sha256_after": "ef" * 32}))
    [no_file] = fp16_label_findings("none", json.dumps({"outcome": "none", "sha256_after": None}))
    assert not same.failed and changed.failed and "changed after the build" in changed.fix and not no_file.failed
    assert fp16_label_findings(None, "") == []


def test_base_digest_prefers_the_registry_digest():
    assert base_digest({"RepoDigests": ["vllm/vllm-openai@sha256:feed"], "Id": "sha256:local"}) == "sha256:feed"
    assert base_digest({"RepoDigests": [], "Id": "sha256:local"}) == "sha256:local"


def test_the_ca_bundle_travels_as_a_secret_file_never_as_an_argument(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nsecretbody\n")
    argv = buildx_argv(BuildRequest(context=tmp_path, dockerfile=tmp_path / "Dockerfile", tag="t:1",
                                    build_args={"EXTRAS": ""}, ca_cert=bundle), tmp_path / "iid")
    assert f"id=ca,src={bundle}" in argv
    assert not any("secretbody" in a for a in argv)
    assert argv[:5] == ["docker", "buildx", "build", "--progress=plain", "--load"]


def test_a_stage_exported_to_a_folder_is_built_by_target_without_loading_an_image(tmp_path):
    argv = buildx_argv(BuildRequest(context=tmp_path, dockerfile=tmp_path / "Dockerfile", target="compile-record",
                                    output_dir=tmp_path / "out"), tmp_path / "iid")
    assert argv[3:9] == ["--progress=plain", "--output", f"type=local,dest={tmp_path / 'out'}",
                         "--target", "compile-record", "-f"]
    assert "--load" not in argv and "--iidfile" not in argv, "BuildKit refuses an image ID file for a local export"


def test_index_urls_travel_as_secrets_read_from_the_environment_never_as_arguments(tmp_path):
    secret = "http://user:s3cretpass@127.0.0.1:9/simple"
    req = BuildRequest(context=tmp_path, dockerfile=tmp_path / "Dockerfile", tag="t:1",
                       build_args={"EXTRAS": ""}, secrets={"pip-index-url": secret})
    argv = buildx_argv(req, tmp_path / "iid")
    assert not any("s3cretpass" in a for a in argv), "an index URL is in the build's argv"
    assert "id=pip-index-url,env=VLLM_TURING_SECRET_PIP_INDEX_URL" in argv
    assert build_environment(req, base={})["VLLM_TURING_SECRET_PIP_INDEX_URL"] == secret
    build_args = [argv[i + 1] for i, a in enumerate(argv) if a == "--build-arg"]
    assert build_args == ["EXTRAS="]


def test_the_hosts_index_urls_come_from_the_environment_first_then_pip_config():
    config = {"global.index-url": "http://a:b@mirror.invalid/simple",
              "global.extra-index-url": "file:///opt/local/simple http://c:d@more.invalid/simple"}.get
    assert pip_index_secrets({}, lambda key: config(key, "")) == {
        "pip-index-url": "http://a:b@mirror.invalid/simple", "pip-extra-index-url": "http://c:d@more.invalid/simple"}
    assert pip_index_secrets({"PIP_INDEX_URL": "https://env.invalid/simple"}, lambda key: config(key, "")) == {
        "pip-index-url": "https://env.invalid/simple", "pip-extra-index-url": "http://c:d@more.invalid/simple"}
    assert pip_index_secrets({}, lambda key: "file:///opt/pypi/simple" if "index" in key else "") == {}, \
        "file:// indexes stay on the host"
    trusted = {"global.extra-index-url": "http://c:d@more.invalid/simple", "global.trusted-host": "more.invalid"}.get
    assert pip_index_secrets({}, lambda key: trusted(key, ""))["pip-trusted-host"] == "more.invalid"
    assert pip_index_secrets({"PIP_TRUSTED_HOST": "a b"}, lambda key: config(key, ""))["pip-trusted-host"] == "a b"
    assert pip_index_secrets({"PIP_TRUSTED_HOST": "a"}, lambda key: "") == {}, "trusted hosts alone do not travel"


def test_every_dockerfile_reads_index_urls_from_secrets_and_declares_no_pip_build_argument():
    for dockerfile in (REPO / "Dockerfile", REPO / "base" / "Dockerfile", REPO / "base" / "cpu" / "Dockerfile"):
        text = dockerfile.read_text()
        assert "ARG PIP_" not in text, f"{dockerfile.relative_to(REPO)} declares a PIP_ build argument"
        if "pip install" in text:
            assert all(f"id={i}," in text for i in ("pip-index-url", "pip-extra-index-url", "pip-trusted-host")), dockerfile


@pytest.mark.parametrize("env, config, found", [
    ({"PIP_CERT": "pip.pem", "REQUESTS_CA_BUNDLE": "req.pem", "SSL_CERT_FILE": "ssl.pem"}, "cfg.pem", ("pip.pem", "PIP_CERT")),
    ({"REQUESTS_CA_BUNDLE": "req.pem", "SSL_CERT_FILE": "ssl.pem"}, "cfg.pem", ("cfg.pem", "pip's cert config")),
    ({"REQUESTS_CA_BUNDLE": "req.pem", "SSL_CERT_FILE": "ssl.pem"}, "", ("req.pem", "REQUESTS_CA_BUNDLE")),
    ({"REQUESTS_CA_BUNDLE": "missing.pem", "SSL_CERT_FILE": "ssl.pem"}, "", ("ssl.pem", "SSL_CERT_FILE")),
    ({"SSL_CERT_FILE": "."}, "", ("system.pem", "the system store")),
])
def test_the_hosts_ca_bundle_is_pips_then_requests_then_openssls_then_the_system_store(tmp_path, env, config, found):
    for name in ("pip.pem", "req.pem", "ssl.pem", "cfg.pem", "system.pem"):
        (tmp_path / name).write_text("-----BEGIN CERTIFICATE-----\n")
    env = {k: str(tmp_path / v) for k, v in env.items()}
    path, source = host_ca_bundle(env, lambda key: str(tmp_path / config) if config else "",
                                  system=(tmp_path / "absent.pem", tmp_path / "system.pem"))
    assert (path.name, source) == found
    assert host_ca_bundle({}, lambda key: "", system=(tmp_path / "absent.pem",)) is None


@pytest.mark.parametrize("argv, here, step", [
    ((), {"debian:bookworm-slim"}, ("use", "debian:bookworm-slim")),
    ((), {BOOTSTRAP_IMAGE}, ("use", BOOTSTRAP_IMAGE)),
    ((), set(), ("pull", "debian:bookworm-slim")),
    (("--os-image", "mine:1"), {BOOTSTRAP_IMAGE}, ("pull", "mine:1")),
    (("--bootstrap",), {BOOTSTRAP_IMAGE}, ("use", BOOTSTRAP_IMAGE)),
    (("--bootstrap", "--no-cache"), {BOOTSTRAP_IMAGE}, ("bootstrap", BOOTSTRAP_IMAGE)),
    (("--bootstrap",), {"debian:bookworm-slim"}, ("bootstrap", BOOTSTRAP_IMAGE)),
])
def test_the_os_image_is_one_here_then_a_pull_and_bootstrap_needs_no_flag(argv, here, step):
    plan = base_plan(build_module().parse(["base", *argv]))
    assert os_image_step(plan, here.__contains__) == step


def test_a_failed_pull_of_the_default_os_image_bootstraps_and_of_a_named_one_is_refused():
    default = base_plan(build_module().parse(["base"]))
    assert after_failed_pull(default, "debian:bookworm-slim", "no route").startswith(
        "cannot pull debian:bookworm-slim (no route): bootstrapping")
    named = base_plan(build_module().parse(["base", "--os-image", "mine:1"]))
    with pytest.raises(Problem, match=r"cannot pull --os-image mine:1 \(no route\): give one"):
        after_failed_pull(named, "mine:1", "no route")


def test_without_ca_cert_the_plan_takes_the_hosts_bundle_and_the_flag_overrides_it(tmp_path):
    host, mine = tmp_path / "host.pem", tmp_path / "mine.pem"
    for bundle in (host, mine):
        bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    args = build_module().parse(["--base", "pypi"])
    plan = build_plan(args, (host, "SSL_CERT_FILE"))
    assert (plan.options.ca_cert, plan.options.ca_source) == (host, "SSL_CERT_FILE")
    assert plan.pypi_base.options.ca_cert == host
    plan = build_plan(build_module().parse(["--base", "pypi", "--ca-cert", str(mine)]), (host, "SSL_CERT_FILE"))
    assert (plan.options.ca_cert, plan.options.ca_source) == (mine, "--ca-cert")
    assert build_plan(args, None).options.ca_cert is None


@pytest.mark.parametrize("lines, expected", [
    (["#9 [4/6] RUN python3 -m patches.turing_clamp apply",
      "#9 0.812 /x/triton_unified_attention.py (vLLM 0.33.0): no function assigns TILE_SIZE_PREFILL",
      "#9 ERROR: executor failed running [/bin/sh -c ...]: exit code: 2",
      "------", "ERROR: failed to solve: exit code: 2"],
     "/x/triton_unified_attention.py (vLLM 0.33.0): no function assigns TILE_SIZE_PREFILL"),
    (["#3 ERROR: pull access denied for nope"], "pull access denied for nope"),
    (["plain failure text"], "plain failure text"),
    # a loaded host: BuildKit marks the step as going on ("#12 ...") after another step's line
    (["#12 [5/14] RUN python3 -m patches.fitcheck.image_passes",
      "#12 31.2 fitcheck: does not fit: e/encoder prefill needs 131072 bytes of shared memory, limit 65536",
      "#13 [internal] load build context", "#12 ...", "#12 ERROR: process did not complete successfully: exit code: 1"],
     "fitcheck: does not fit: e/encoder prefill needs 131072 bytes of shared memory, limit 65536"),
])
def test_a_failed_build_is_told_by_the_failing_steps_last_line(lines, expected):
    assert failure_line(lines) == expected


def test_the_debian_mirror_is_read_from_the_hosts_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n")
    assert debian_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text("deb [arch=amd64] http://one.example/debian bookworm main\n")
    assert debian_mirror(tmp_path) == "http://one.example/debian"


def test_build_progress_is_the_steps_and_our_lines_in_a_log_and_one_live_line_on_a_terminal():
    log, terminal = io.StringIO(), io.StringIO()
    build_output = ["#4 [internal] load metadata for docker.io/library/x", "#5 [stage-0  2/3] RUN python3 -m patches.fitcheck",
                    "#5 1.0 Using default Mamba SSU config. Performance might be sub-optimal!",
                    "#5 12.3 152 launches", "#5 30.0 fitcheck: sm75 float16: 900/1200 compiled, 30 s", "#5 DONE 40.1s",
                    "#7 [proof 1/1] RUN python3 -m patches.fitcheck.image_passes",
                    "#6 [stage-0  3/3] RUN " + "x" * 300, "#6 ERROR: process did not complete"]
    for stream, live in ((log, False), (terminal, True)):
        view = ProgressView(stream, live=live)
        for line in build_output:
            view.feed(line + "\n")
        view.close()
        assert view.lines == build_output, "every line is kept for the failure message"
    assert log.getvalue().splitlines() == [
        "[2/3] RUN python3 -m patches.fitcheck", "fitcheck: sm75 float16: 900/1200 compiled, 30 s",
        "[proof 1/1] RUN python3 -m patches.fitcheck.image_passes",  # a stage the Dockerfile names is named
        "[3/3] RUN " + "x" * 96 + "...", "#6 ERROR: process did not complete"]
    assert terminal.getvalue().count("\n") == 1, "a terminal gets one line rewritten in place"
    assert "[stage-0  2/3] RUN python3 -m patches.fitcheck  152 launches" in terminal.getvalue()
