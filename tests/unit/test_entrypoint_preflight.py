"""How the preflight runs its checks: slow background checks overlap the others, and
SKIP_CHECKS keeps a skipped one from starting at all."""
from entrypoint.preflight import Background, run_checks
from contract.verdict import Status, passed


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
