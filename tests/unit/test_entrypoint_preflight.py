"""How the preflight runs its checks: slow background checks overlap the others, and
SKIP_CHECKS keeps a skipped one from starting at all."""
from contract import layout
from contract.verdict import Status, passed
from entrypoint.device import Device
from entrypoint.preflight import Background, plan, resolve_models, run_checks
from entrypoint.settings import parse_settings

from tests.support.model_files import write_model_dir

T4 = Device("StandIn Tesla T4", (7, 5), 65536, 1)


def test_a_background_check_starts_before_the_others_and_reports_in_its_place():
    events = []

    def start_fit():
        events.append("fit started")
        return lambda: events.append("fit collected") or passed("fit", "fits")

    checks = {"torch": lambda: events.append("torch ran") or passed("torch", "ok"),
              "fit": Background(start_fit),
              "port": lambda: events.append("port ran") or passed("port", "free")}
    results = run_checks(checks, skip=())
    assert events == ["fit started", "torch ran", "fit collected", "port ran"]
    assert [r.name for r in results] == ["torch", "fit", "port"]
    assert all(r.status == Status.PASS for r in results)


def test_a_skipped_background_check_is_never_started():
    started = []
    results = run_checks({"fit": Background(lambda: started.append(1) or (lambda: passed("fit", "x")))},
                         skip=("fit",))
    assert started == []
    assert results[0].status == Status.WARN and "SKIP_CHECKS" in results[0].message


def test_the_fit_check_takes_the_config_of_the_model_resolved_once(tmp_path):
    write_model_dir(tmp_path / "m")
    settings = parse_settings({"MODEL": str(tmp_path / "m"), "HF_HUB_CACHE": str(tmp_path / "hub")})
    models = resolve_models(settings)
    assert models.model.found.path == str(tmp_path / "m") and models.drafter is None
    assert isinstance(plan(settings, T4, models, {})["fit"], Background)
    (tmp_path / "m" / "config.json").unlink()
    fit = plan(settings, T4, models, {})["fit"]()
    assert fit.status is Status.WARN and "config.json" in fit.message


def test_the_fit_check_runs_on_the_config_of_a_model_whose_weights_are_not_whole(tmp_path, monkeypatch):
    # The model check fails on the truncated weights and says so; the fit check still judges the
    # config.json it read (here from a table that holds no verdict, so the full check is started).
    write_model_dir(tmp_path / "m")
    for weights in (tmp_path / "m").glob("*.safetensors"):
        weights.write_bytes(weights.read_bytes()[:-1])
    monkeypatch.setenv(layout.ENV_FIT_TABLE, str(tmp_path / "no-table.json"))
    settings = parse_settings({"MODEL": str(tmp_path / "m"), "HF_HUB_CACHE": str(tmp_path / "hub")})
    models = resolve_models(settings)
    assert models.model.found is None and models.model.config is not None
    fit = plan(settings, T4, models, {})["fit"]
    assert isinstance(fit, Background)
    result = fit.start()()
    assert result.name == "fit" and "[full check: no fit table at" in result.message
