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


class StandinClock:
    """perf_counter for the preflight, moved only by the checks themselves."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_background_check_is_timed_by_its_start_and_its_wait_not_by_the_checks_ahead(monkeypatch):
    from entrypoint import preflight

    clock = StandinClock()
    monkeypatch.setattr(preflight.time, "perf_counter", clock)

    def start():
        clock.now += 0.03  # its start (the fit table lookup)
        return lambda: passed("fit", "fits")

    def slow_torch():
        clock.now += 5.0
        return passed("torch", "ok")

    results = run_checks({"torch": slow_torch, "fit": Background(start)}, skip=())
    assert [round(r.elapsed_s, 3) for r in results] == [5.0, 0.03]


FACTS = {"version": "2.14.0+cu130", "cuda": "13.0", "arch_list": ["sm_75", "sm_86"]}


def test_the_driver_context_of_the_torch_check_runs_beside_the_other_checks(monkeypatch):
    import threading

    from entrypoint import preflight
    from entrypoint.image_facts import Facts, Loaded

    release, asked = threading.Event(), []

    def context_error(ordinal):
        asked.append(ordinal)
        release.wait()
        return None

    monkeypatch.setattr(preflight, "context_error", context_error)
    check = preflight.torch_check(Loaded(Facts({"torch": FACTS})))(T4)
    assert isinstance(check, Background)
    collect = check.start()  # returns while the driver call is still blocked
    assert not release.is_set()
    release.set()
    result = collect()
    assert result.status is Status.PASS and "sm_75" in result.message and asked == [T4.ordinal]


def test_the_fit_checks_start_runs_on_its_own_thread_and_one_that_hangs_fails_at_the_deadline(monkeypatch):
    import threading

    from entrypoint import preflight

    release, order = threading.Event(), []

    def start():
        release.wait()
        order.append("looked up")
        return lambda: passed("fit", "fits")

    collect = preflight.begun_in_thread("fit", start)  # returns while the lookup is blocked
    order.append("other checks ran")
    release.set()
    assert collect().message == "fits" and order == ["other checks ran", "looked up"]

    never = threading.Event()
    monkeypatch.setattr(preflight, "CHECK_DEADLINE_S", 0.05)
    hung = preflight.begun_in_thread("fit", lambda: never.wait())()
    never.set()
    assert hung.status is Status.FAIL and hung.message == "did not start in 0.05 s" and "SKIP_CHECKS=fit" in hung.fix
    broken = run_checks({"fit": Background(lambda: preflight.begun_in_thread("fit", lambda: 1 / 0))}, skip=())
    assert broken[0].status is Status.FAIL and "ZeroDivisionError" in broken[0].message


def test_a_check_begun_early_runs_before_its_turn_and_one_that_hangs_fails_at_the_deadline(monkeypatch):
    import threading

    from entrypoint import preflight

    ran = threading.Event()
    early = preflight.begun("clamp", lambda: ran.set() or passed("clamp", "present"))
    collect = early.start()
    assert ran.wait(30)  # begun at the start, before anything collects it
    assert collect().message == "present"

    never = threading.Event()
    monkeypatch.setattr(preflight, "CHECK_DEADLINE_S", 0.05)
    hung = preflight.begun("clamp", lambda: never.wait()).start()()
    never.set()
    assert hung.status is Status.FAIL and hung.message == "did not finish in 0.05 s" and "SKIP_CHECKS=clamp" in hung.fix
    broken = run_checks({"clamp": preflight.begun("clamp", lambda: 1 / 0)}, skip=())
    assert broken[0].status is Status.FAIL and "ZeroDivisionError" in broken[0].message
    skipped = run_checks({"clamp": preflight.begun("clamp", lambda: never.clear())}, skip=("clamp",))
    assert skipped[0].message == "skipped by SKIP_CHECKS" and never.is_set()  # a skipped check is not begun


def test_the_torch_check_takes_the_context_answer_it_is_given():
    from entrypoint import preflight
    from entrypoint.image_facts import Facts, Loaded

    asked = []
    refused = preflight.torch_check(Loaded(Facts({"torch": FACTS})),
                                    lambda ordinal: asked.append(ordinal) or "CUDA_ERROR_OUT_OF_MEMORY (2)")
    result = refused(T4).start()()
    assert result.status is Status.FAIL and "CUDA_ERROR_OUT_OF_MEMORY (2)" in result.message and asked == [T4.ordinal]


def test_a_driver_that_makes_no_context_fails_the_torch_check_and_one_that_hangs_fails_in_time(monkeypatch):
    import threading

    from entrypoint import preflight
    from entrypoint.image_facts import Facts, Loaded

    loaded = Loaded(Facts({"torch": FACTS}))
    monkeypatch.setattr(preflight, "context_error", lambda ordinal: "cuInit failed: CUDA_ERROR_NO_DEVICE (100)")
    refused = preflight.torch_check(loaded)(T4).start()()
    assert refused.status is Status.FAIL and "CUDA_ERROR_NO_DEVICE" in refused.message

    never = threading.Event()
    monkeypatch.setattr(preflight, "context_error", lambda ordinal: never.wait())
    monkeypatch.setattr(preflight, "CHECK_DEADLINE_S", 0.05)
    hung = preflight.torch_check(loaded)(T4).start()()
    never.set()
    assert hung.status is Status.FAIL and "no answer from cuDevicePrimaryCtxRetain in 0.05 s" in hung.message
