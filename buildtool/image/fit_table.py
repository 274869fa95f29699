"""The fit report of a build, as the line the build ends with (pure)."""

def fit_verdict_line(report: dict) -> str:
    device = report.get("device", {})
    return "%d launches, max shared %s of %s bytes on %s: %s" % (
        len(report.get("launches", [])), report.get("max_shared"), device.get("limit"), device.get("name", "?"),
        "every launch fits" if report.get("all_fit") else "SOME DO NOT FIT")

