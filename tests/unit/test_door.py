"""The door held: code outside door/ that reads outside data or starts a child another way fails
here (tests/support/door_scan.py finds the sites by syntax tree).

A new surface that opens a user's file with open(), parses with json.loads, unpacks a zip, calls
requests or huggingface_hub, or runs a subprocess without door/children.py fails this test the day
it lands. What passes: a call into door/ (door.files.read_json for outside data; door.files.own_json
/ read_own / read_own_bytes where the trust is the project's own words, word_json for a user's
flag value, read_system for the kernel's and the host's files; door.children for every child), a
docker SDK container removed in the same function's `finally`, or one of the few reasoned
allowances below.
"""
from __future__ import annotations

import shutil
import textwrap

import pytest

from tests.support import door_scan

IMAGE_CHILD = ("in the image, where door/children.py is not shipped: the entrypoint's own probe, "
               "waited under a deadline and stopped by entrypoint/stop_signals.py before the exec")
HOST_HTTP = ("the host's one HTTP client (buildtool/endpoint): a total deadline and a byte cap on every "
             "body; door/remote.py is to take it")
OWN_COMPOSE = "the compose file this tool wrote itself in the same run (YAML: door/data.py is to take it)"
CLAMP_RUNTIME = ("the clamp's code inside vLLM's module, which cannot import this repository: it reads the fit table "
                 "and ranked configurations the build wrote, at their fixed paths")
DEVICE_TOOL = ("GPU-machine tooling: it reads what it staged itself (the release's package, the image facts, its "
               "children's reports) and waits its own children, on a machine that ends with the call")
POPEN_OWN_STOP = "a long-lived child the function stops itself (kill on timeout and Ctrl-C), its output a log"
CODE_ZIP = ("the image build's code stage zips this repository's own sources and the bytecode it compiled from "
            "them; it runs alone, bind-mounted, so it cannot import door/, and it reads no zip")

VEHICLE_BUILD = ("the CPU vehicle's build step, where door/ is not: it edits two files of packages the lock "
                 "installed by hash, and runs its proof of them in a child")

# Not outside data, or a bound the site keeps itself: each reasoned; kept as small as the code allows.
SHARED_DOUBLE = "a test double the benches share with the tests, moved out of tests/support (issue 63)"
ALLOWED: dict[tuple[str, str], str] = {
    ("buildtool/docker/engine.py", "archive"): "a tar the Docker engine makes of one path of an image, one member read",
    ("buildtool/image/verify.py", "archive"): "writes a one-file tar (tar_of) to copy into the check container",
    ("buildtool/image/code_zip.py", "archive"): CODE_ZIP,
    ("buildtool/image/code_zip.py", "path-read"): CODE_ZIP,
    ("base/cpu/cpu_fixes.py", "path-read"): VEHICLE_BUILD,
    ("base/cpu/cpu_fixes.py", "child"): VEHICLE_BUILD,
    ("entrypoint/checks/clamp.py", "child"): IMAGE_CHILD,
    ("entrypoint/checks/parallel.py", "child"): IMAGE_CHILD,
    ("entrypoint/checks/model.py", "child"): IMAGE_CHILD + " (a tokenizer.json parsed by door.files in a child, off the GIL)",
    ("entrypoint/linker_cache.py", "child"): IMAGE_CHILD,
    ("entrypoint/checks/devices.py", "open"): "opens a /dev/nvidia* character device O_NONBLOCK to probe access, reads nothing",
    ("entrypoint/ready.py", "network"): "the entrypoint polls the server it started itself on loopback, with a deadline",
    ("entrypoint/start_ledger.py", "open"): "the entrypoint's own ledger, O_NOFOLLOW, read up to LEDGER_MAX_BYTES under its lock",
    ("buildtool/endpoint/__init__.py", "network"): HOST_HTTP,
    ("buildtool/endpoint/client.py", "network"): HOST_HTTP,
    ("buildtool/endpoint/client.py", "json"): HOST_HTTP + " (its parse refuses deep nesting)",
    ("tooling/serving_stack.py", "network"): "the serving tier's own vehicle on loopback",
    ("tooling/serving_stack.py", "path-read"): OWN_COMPOSE,
    ("tooling/serving_stack.py", "yaml"): OWN_COMPOSE,
    ("tooling/serving_stack.py", "child"): POPEN_OWN_STOP + " (VehicleAhead.stop)",
    ("tooling/clamp_gpu.py", "child"): POPEN_OWN_STOP + " (the device run's recorders, waited by wait())",
    ("tooling/vllm_releases.py", "archive"): "reads members of a vLLM wheel and sdist it downloaded by pinned version",
    ("tooling/ci_cpu.py", "child"): POPEN_OWN_STOP + " (the command it measures)",
    ("tooling/servebench/driver.py", "child"): POPEN_OWN_STOP + " (docker kill on timeout and Ctrl-C)",
    ("tooling/fetch_times.py", "hub"): "the baseline the bench times the project's fetch against, on a loopback mirror",
    ("buildtool/audit.py", "network"): "names requests' Session type for pip-audit; the session it hands over reads through door.remote",
    ("buildtool/smoke/media.py", "path-read"): "wave.open writes the probe's own sound into a BytesIO",
    ("buildtool/units/monitoring.py", "yaml"): "the rules file of this repository (monitoring/rules.yml), read into the PrometheusRule",
    ("buildtool/units/serialize.py", "yaml"): "reads back YAML this serializer wrote itself in the same call, to check it means what was asked",
    ("entrypoint/fetch/hub_client.py", "hub"): "huggingface_hub's hf_hub_url builds the file's URL only; door.remote reads it",
    ("entrypoint/fetch/hub_client.py", "open"): "the fetch's own partial file, opened to append what door.remote downloads",
    ("entrypoint/fetch/fetch_model.py", "open"): "the fetch's own lock, created O_NONBLOCK | O_NOFOLLOW and refused unless a regular file",
    ("entrypoint/fetch/verify.py", "open"): "hashes a file the fetch staged itself, in chunks, under the verify deadline",
    ("patches/turing_clamp/runtime.py", "open"): CLAMP_RUNTIME,
    ("patches/turing_clamp/runtime.py", "json"): CLAMP_RUNTIME,
    ("tooling/fp16_census.py", "archive"): DEVICE_TOOL,
    ("tooling/fp16_census.py", "path-read"): DEVICE_TOOL,
    ("tooling/fp16_census.py", "json"): DEVICE_TOOL,
    ("tooling/fp16_census.py", "child"): DEVICE_TOOL,
    ("tooling/fp16_upcast.py", "path-read"): "vLLM release files from the release cache and this repository's docs/fp16.md",
    ("tooling/gpu_site.py", "archive"): DEVICE_TOOL,
    ("tooling/gpu_site.py", "path-read"): DEVICE_TOOL,
    ("tooling/gpu_site.py", "json"): DEVICE_TOOL,
    ("tooling/gpu_site.py", "child"): DEVICE_TOOL,
    ("tooling/hub_mirror.py", "network"): SHARED_DOUBLE + " (asks its own olah on loopback whether it is up)",
    ("tooling/hub_mirror.py", "child"): SHARED_DOUBLE + " (git, and its own olah, stopped by stop())",
    ("tooling/hub_mirror.py", "path-read"): SHARED_DOUBLE + " (files it wrote itself, and its own olah's log)",
    ("tooling/standins/standin_driver.py", "child"): SHARED_DOUBLE + " (gcc on the stand-in's own C source)",
    ("tooling/preflight_gpu.py", "path-read"): DEVICE_TOOL,
    ("tooling/preflight_gpu.py", "json"): DEVICE_TOOL,
    ("tooling/preflight_gpu.py", "child"): DEVICE_TOOL,
}


def unexplained(sites: list[door_scan.Site]) -> list[door_scan.Site]:
    """The sites neither allowed nor pending another helper's branch."""
    return [site for site in sites if (site.path, site.kind) not in ALLOWED]


@pytest.fixture(scope="module")
def product_sites() -> list[door_scan.Site]:
    return door_scan.scan_product()


def test_no_code_outside_the_door_reads_outside_data_or_starts_a_child_around_it(product_sites):
    found = unexplained(product_sites)
    assert not found, ("outside data read (or a child started) around door/; route it through door/ "
                       "or reason an allowance in tests/unit/test_door.py:\n" + "\n".join(map(str, found)))


def test_every_allowance_and_pending_entry_still_names_a_site(product_sites):
    """An entry left behind after its site moved through the door would let the next one in."""
    used = {(site.path, site.kind) for site in product_sites}
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"entries that name no site any more, remove them: {stale}"


def test_the_scan_covers_the_product():
    names = {str(path.relative_to(door_scan.REPO)) for path in door_scan.product_files()}
    assert {"build.py", "buildtool/model_fetch.py", "entrypoint/start.py", "bench/preflight", "tooling/servebench/driver.py",
            "patches/fitcheck/proof.py", "contract/layout.py", "imagefacts/read.py", "tooling/vllm_releases.py"} <= names
    assert not any(name.startswith(("door/", "tests/")) for name in names)


BYPASSES = {
    "open": "def f(path):\n    with open(path) as h:\n        return h.read()\n",
    "path-read": "def f(path):\n    return path.read_text()\n",
    "json": "import json\ndef f(text):\n    return json.loads(text)\n",
    "yaml": "import yaml\ndef f(text):\n    return yaml.safe_load(text)\n",
    "archive": "import zipfile\n",
    "network": "import requests\n",
    "hub": "from huggingface_hub import hf_hub_download\n",
    "child": "import subprocess\ndef f():\n    return subprocess.run(['docker', 'run', 'x'])\n",
}


@pytest.mark.parametrize("kind", sorted(BYPASSES))
def test_each_kind_of_bypass_is_found(kind):
    assert [site.kind for site in door_scan.scan_source(BYPASSES[kind], "buildtool/new_surface.py")] == [kind]


@pytest.mark.parametrize("source, why", [
    ("from door import files\ndef f(p):\n    return files.read_json(p, 'p')\n", "through the door"),
    ("def f(p, text):\n    with open(p, 'w') as h:\n        h.write(text)\n", "a write, no data in"),
    ("from pathlib import Path\nDOC = Path('docs/x.md').read_text()\n", "a literal path of the repo"),
    ("def f(client):\n    c = client.containers.create('i')\n    try:\n        c.start()\n"
     "    finally:\n        c.remove(force=True)\n", "the container removed in a finally"),
])
def test_what_the_door_allows_is_not_a_site(source, why):
    assert door_scan.scan_source(source, "buildtool/new_surface.py") == [], why


def test_a_bypass_planted_in_a_new_module_fails_the_door(tmp_path):
    """A copy of the product with one new module that reads a user's file and parses it around the
    door: the same judgement as the product's test finds it, names the file and the line."""
    for top in ("build.py",):
        shutil.copy(door_scan.REPO / top, tmp_path / top)
    shutil.copytree(door_scan.REPO / "buildtool", tmp_path / "buildtool",
                    ignore=shutil.ignore_patterns("__pycache__"))
    clean = unexplained(door_scan.scan_product(tmp_path))
    (tmp_path / "buildtool" / "new_surface.py").write_text(textwrap.dedent("""\
        import json
        import subprocess

        def run(args):
            with open(args.database) as handle:
                records = json.load(handle)
            subprocess.run(["docker", "run", "--rm", "fetcher", args.repo])
            return records
    """))
    planted = [site for site in unexplained(door_scan.scan_product(tmp_path)) if site not in clean]
    assert [str(site) for site in planted] == [
        "buildtool/new_surface.py:5: open: open(args.database)",
        "buildtool/new_surface.py:6: json: json.load",
        "buildtool/new_surface.py:7: child: subprocess.run",
    ]
    (tmp_path / "door").mkdir()
    (tmp_path / "door" / "new_surface.py").write_text((tmp_path / "buildtool" / "new_surface.py").read_text())
    assert not [site for site in door_scan.scan_product(tmp_path) if site.path.startswith("door/")]
