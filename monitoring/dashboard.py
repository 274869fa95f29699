"""The Grafana dashboard of the servers, generated with Grafana's own foundation SDK (no hand-written
JSON): `python3 monitoring/dashboard.py` writes monitoring/vllm-turing.dashboard.json; import it in a
Grafana that reads the Prometheus of `build.py units --monitoring`. Its panels read the recording
rules of monitoring/rules.yml where one exists; tests/unit/test_monitoring.py checks every panel's
query with promtool and holds the committed file to this generator.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import common, dashboard, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement
from grafana_foundation_sdk.models.dashboard import DataSourceRef

OUTPUT = Path(__file__).with_name("vllm-turing.dashboard.json")
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
BY_SERVER = "{{model_name}} on {{instance}}"

# (title, unit, [(query, legend)]), in the order shown, two to a row.
PANELS = (
    ("KV cache usage", "percentunit", [("vllm_turing:kv_cache_usage:max", BY_SERVER)]),
    ("Requests waiting and running", "short", [
        ("vllm_turing:requests_waiting:sum", "waiting: " + BY_SERVER),
        ("sum by (job, instance, model_name) (vllm:num_requests_running)", "running: " + BY_SERVER)]),
    ("Time to first token, p90", "s", [
        ("vllm_turing:time_to_first_token_seconds:p90_5m", "5 min: " + BY_SERVER),
        ("vllm_turing:time_to_first_token_seconds:p90_6h", "6 h: " + BY_SERVER)]),
    ("Tokens per second", "short", [
        ("sum by (job, instance, model_name) (rate(vllm:prompt_tokens_total[5m]))", "prompt: " + BY_SERVER),
        ("sum by (job, instance, model_name) (rate(vllm:generation_tokens_total[5m]))", "generated: " + BY_SERVER)]),
    ("Up (0: down, e.g. a failed preflight restarting)", "short", [('up{job="vllm-turing"}', "{{instance}}")]),
    ("Cold starts per hour (IDLE_AFTER starts on demand)", "short", [("vllm_turing:cold_starts:1h", "{{instance}}")]),
    ("What the first request waited (the last start)", "s", [("vllm_turing:start_wait_seconds", "{{instance}}")]),
)


def queries() -> list[str]:
    return [query for _, _, targets in PANELS for query, _ in targets]


def build() -> dict:
    board = (dashboard.Dashboard("vllm-turing")
             .uid("vllm-turing")
             .tags(["vllm", "vllm-turing"])
             .refresh("30s")
             .time("now-6h", "now")
             .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus")))
    for title, unit, targets in PANELS:
        panel = (timeseries.Panel().title(title).unit(unit).datasource(DATASOURCE).height(8).span(12)
                 .legend(common.VizLegendOptions().show_legend(True).display_mode(LegendDisplayMode.LIST)
                         .placement(LegendPlacement.BOTTOM)))
        for ref, (query, legend) in zip("ABCD", targets):
            panel = panel.with_target(prometheus.Dataquery().expr(query).legend_format(legend).ref_id(ref))
        board = board.with_panel(panel)
    return json.loads(JSONEncoder(sort_keys=True, indent=2).encode(board.build()))


def text() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the servers' Grafana dashboard (JSON).")
    parser.add_argument("--out", type=Path, default=OUTPUT, help=f"file to write (default: {OUTPUT.name} beside this script)")
    args = parser.parse_args(argv)
    try:
        args.out.write_text(text())
    except OSError as exc:
        parser.exit(2, f"{parser.prog}: cannot write {args.out}: {exc.strerror}; pass --out with a writable path\n")
    sys.stdout.write(f"wrote {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
