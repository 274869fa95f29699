"""patches/fitcheck/image_passes.py, the Dockerfile's fit-check step: each pass's report written
where the image keeps it, and the first failing pass ends the step with its exit code (the build
fails), its report written, no later pass run. The passes themselves (the real fit check) run in
every image build; here the fit check is a stand-in that answers by pass."""
import json

import pytest

from patches.fitcheck import image_passes


@pytest.fixture
def passes(tmp_path, monkeypatch):
    reports = [tmp_path / "sm75.json", tmp_path / "sm86.json", None]
    monkeypatch.setattr(image_passes, "PASSES", tuple(zip(
        (("--device", "sm75"), ("--device", "sm86"), ("--device", "sm90")), reports)))
    monkeypatch.setattr(image_passes, "FIT_TABLE", str(tmp_path / "fit-table.json"))
    monkeypatch.setattr(image_passes, "VERSIONS_REPORT", str(tmp_path / "versions.json"))
    monkeypatch.setattr(image_passes, "proved_versions", lambda: {"vllm": "0.33.0", "torch": "2.14.0", "triton": "3.8.0"})
    return tmp_path, reports


def standin_fitcheck(codes: dict, ran: list):
    def fitcheck(argv):
        device = argv[argv.index("--device") + 1]
        ran.append(argv)
        print(json.dumps({"device": device}))
        return codes.get(device, 0)
    return fitcheck


def test_every_pass_writes_its_report_into_the_one_table_then_the_versions(passes, monkeypatch):
    folder, reports = passes
    ran = []
    monkeypatch.setattr(image_passes, "fitcheck", standin_fitcheck({}, ran))
    assert image_passes.main() == 0
    assert [json.loads(r.read_text())["device"] for r in reports[:2]] == ["sm75", "sm86"]
    assert all(argv[-3:] == ["--write-table", str(folder / "fit-table.json"), "--json"] for argv in ran)
    assert len(ran) == 3 and json.loads((folder / "versions.json").read_text())["vllm"] == "0.33.0"


def test_a_failing_pass_ends_the_step_with_its_code_and_its_report(passes, monkeypatch, capsys):
    folder, reports = passes
    ran = []
    monkeypatch.setattr(image_passes, "fitcheck", standin_fitcheck({"sm86": 1}, ran))
    assert image_passes.main() == 1
    assert json.loads(reports[1].read_text())["device"] == "sm86"   # the build log names the launch from it
    assert len(ran) == 2 and not (folder / "versions.json").exists()
    assert capsys.readouterr().err == ""  # nothing after the pass's own lines: build.py reports the last one
