"""The fit report of a build, as the table the build ends with (pure)."""

COLUMNS = ("model", "layer", "path", "query_len", "tile_size", "block_m", "num_warps", "num_stages",
           "shared", "limit", "headroom")


def render_fit_summary(report: dict) -> str:
    launches = report.get("launches", [])
    rows = [[_cell(launch.get(col)) for col in COLUMNS] + ["fits" if launch.get("fits") else "DOES NOT FIT"]
            for launch in launches]
    header = list(COLUMNS) + ["verdict"]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)] if rows else [len(h) for h in header]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)) for line in [header] + rows]
    lines.append(fit_verdict_line(report))
    return "\n".join(lines)


def fit_verdict_line(report: dict) -> str:
    device = report.get("device", {})
    return "%d launches, max shared %s of %s bytes on %s: %s" % (
        len(report.get("launches", [])), report.get("max_shared"), device.get("limit"), device.get("name", "?"),
        "every launch fits" if report.get("all_fit") else "SOME DO NOT FIT")


def _cell(value) -> str:
    return "default" if value is None else str(value)
