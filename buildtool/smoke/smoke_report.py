"""The smoke report: a dict (printed with --json) and a plain-text table."""
from __future__ import annotations

from contract.verdict import Status

from .inputs import Inputs
from .readiness import Readiness
from .runner import Row

COUNTED = (Status.PASS, Status.FAIL, Status.NOT_JUDGED, Status.SKIP)


def build_report(url: str, model: str | None, readiness: Readiness, rows: list[Row],
                 inputs: Inputs | None = None) -> dict:
    first = next((r for r in rows if r.first_token_s is not None), None)
    counts = {status.value: sum(r.status is status for r in rows) for status in COUNTED}
    ok = readiness.ready and counts[Status.FAIL.value] == 0
    return {
        "url": url,
        "model": model,
        "ready": readiness.ready,
        "readiness_error": readiness.error,
        # "ready" when /health never answered 200 in time; "access" when the API behind it refused us
        "stopped_at": None if readiness.ready else readiness.verdict.name,
        # measured from the start of this command, so it is a lower bound of the load
        "time_to_ready_s": readiness.elapsed_s if readiness.ready else None,
        "first_token": None if first is None else {
            "check": first.name, "time_to_first_token_s": first.first_token_s,
            "total_s": round(first.verdict.elapsed_s, 3)},
        # the inputs asked beyond text and where smoke learned them (null when not ready)
        "inputs": None if inputs is None else inputs.to_dict(),
        "checks": [r.to_dict() for r in rows],
        "counts": counts,
        "ok": ok,
    }


def _detail(check: dict) -> str:
    text = check["message"] or check["proves"]
    return f"{text}; fix: {check['fix']}" if check["fix"] else text


def format_table(report: dict) -> str:
    lines = [f"smoke test of {report['url']}  model: {report['model'] or '(none listed)'}"]
    if not report["ready"]:
        lines.append(f"{'NOT READY' if report.get('stopped_at') == 'ready' else 'STOPPED'}: "
                     f"{report['readiness_error']}")
        return "\n".join(lines)
    lines.append(f"ready after {report['time_to_ready_s']:.1f} s")
    if report["first_token"]:
        ft = report["first_token"]
        lines.append(f"first request ({ft['check']}): first token after "
                     f"{ft['time_to_first_token_s']:.2f} s, done after {ft['total_s']:.2f} s")
    if report.get("inputs"):
        listed = report["inputs"]["modalities"]
        lines.append(f"inputs: {', '.join(listed) if listed else 'asked of the server'} "
                     f"({report['inputs']['source']})")
    rows = [(c["name"], c["status"].upper(),
             "" if c["http_status"] is None else f"{c['elapsed_s']:.2f}s",
             _detail(c)) for c in report["checks"]]
    widths = [max(len(row[i]) for row in rows + [("check", "result", "time", "")]) for i in range(3)]
    header = ("check", "result", "time", "detail")
    for row in [header] + rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    counts = report["counts"]
    lines.append(", ".join(f"{counts[s.value]} {word}" for s, word in zip(
        COUNTED, ("passed", "failed", "not judged", "skipped")))
        + ": " + ("OK" if report["ok"] else "FAILED"))
    return "\n".join(lines)
