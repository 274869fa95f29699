"""One device table (contract/devices.py): a device's shared-memory limit is written there and
nowhere else in the code, and every caller that names a device reads it from there."""
import io
import tokenize

from contract.devices import DEVICES, DeviceLimits
from patches.fitcheck.proof import FitOptions, resolve_device
from tests import REPO

CODE = ("build.py", "bench", "buildtool", "contract", "entrypoint", "imagefacts", "patches", "tooling", "tests/gpu")
# Numbers that equal a device limit by chance, by the name they are assigned to.
NOT_DEVICE_LIMITS = {"MAX_SEQS"}


def code_files():
    for name in CODE:
        path = REPO / name
        for file in [path] if path.is_file() else sorted(path.rglob("*")):
            is_script = file.parent.name == "bench" and not file.suffix
            if file.is_file() and (file.suffix == ".py" or is_script or file.name == "run-on-device"):
                yield file


def test_a_device_limit_is_written_only_in_the_device_table():
    limits = {device.limit for device in DEVICES.values()}
    written = []
    for file in code_files():
        for token in tokenize.generate_tokens(io.StringIO(file.read_text()).readline):
            if token.type != tokenize.NUMBER or token.string.startswith("0") or not token.string.replace("_", "").isdigit():
                continue
            assigned_to = token.line.split("=")[0].strip()
            if int(token.string.replace("_", "")) in limits and assigned_to not in NOT_DEVICE_LIMITS:
                written.append(f"{file.relative_to(REPO)}:{token.start[0]}")
    elsewhere = [place for place in written if not place.startswith("contract/devices.py:")]
    assert elsewhere == [], f"device limits written outside contract/devices.py: {elsewhere}"
    assert len(written) == len(DEVICES), written


def test_the_fit_checks_presets_are_the_tables_devices():
    for name, device in DEVICES.items():
        assert isinstance(device, DeviceLimits) and device.cc >= 70 and device.limit > 0
        assert resolve_device(FitOptions(device=name)) == {"name": name, "cc": device.cc, "limit": device.limit}


def test_the_ampere_proxy_makes_the_encoder_runs_simulated_device_ampere(monkeypatch):
    """tests/gpu/ampere_proxy.py swaps the device tooling/encoder_attention_run.py's simulated one
    answers as; a renamed attribute there would leave the Ampere runs on Turing's numbers."""
    from tests.gpu import ampere_proxy
    from tooling import encoder_attention_run as runner

    for name in ("SIMULATED", "encoder_batch"):  # restored after the test: the proxy sets both
        monkeypatch.setattr(runner, name, getattr(runner, name))
    monkeypatch.setattr(runner, "main", lambda argv: runner.SIMULATED)
    assert runner.SIMULATED == DEVICES["sm75"]
    assert ampere_proxy.main(["encoder", "float16"]) == DEVICES["sm86"]
