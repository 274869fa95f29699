"""`build.py smoke [URL]` / `python3 -m buildtool.smoke [URL]`: wait, check, report.

Exit 0 when the server became ready and no check failed (a skipped or not-judged row does
not fail), 1 when not, 2 on bad input.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from urllib.parse import urlsplit


from buildtool.status_line import StatusLine
from contract.verdict import Result, Status
from door.problem import UsageError
from buildtool import endpoint
from buildtool.endpoint.client import MAX_DEADLINE_S, EndpointClient, EndpointError, valid_deadline

from . import inputs as served_inputs
from .checks import CHECKS, MODALITIES
from .metrics import METRIC_ROWS, metric_rows
from .readiness import Readiness, wait_ready
from .runner import metric_row, read_metrics, run_check, served_models
from .smoke_report import build_report, format_table

DEFAULT_URL = "http://127.0.0.1:8000"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", nargs="?", default=DEFAULT_URL,
                        help=f"the server's base URL (default {DEFAULT_URL}, the compose/Quadlet endpoint)")
    parser.add_argument("--model", help="the served model id to expect (default: the first /v1/models lists)")
    parser.add_argument("--modalities", default="auto",
                        help="input the model takes beyond text: 'auto' (default: what the served model's "
                             "config.json gives it, read from --model-config or the folder /v1/models names; "
                             "without one, send the image and audio checks and skip them when the server "
                             "refuses that input), or a comma list of image,audio, or 'text' for none")
    parser.add_argument(served_inputs.CONFIG_FLAG, metavar="PATH",
                        help="the served model's folder on this host, or its config.json: its vision and "
                             "audio towers decide which inputs are asked (default: the folder /v1/models "
                             "names, under $MODEL_DIR for a root under /models, when this host has it)")
    parser.add_argument("--only", action="append", metavar="CHECK",
                        help=f"run only this check (repeatable): {', '.join([c.name for c in CHECKS] + list(METRIC_ROWS))}")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds to wait for /health to answer 200 (default 600)")
    parser.add_argument("--connect-grace", type=float, default=5.0,
                        help="seconds a refused connection counts as 'still starting', before the server "
                             "first answers (default 5: a published container port accepts connections "
                             "from the start; raise it for a server that binds its port late)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between /health polls (default 2)")
    parser.add_argument("--request-timeout", type=float, default=300.0,
                        help="seconds one check may take, its whole reply or stream included (default 300)")
    parser.add_argument("--contract-only", action="store_true",
                        help="judge only the server's side of the contract (status codes, field shapes, "
                             "streaming, tools and extra keys accepted); report the answers' correctness as "
                             "'not judged' (for a model with random or untrained weights)")
    endpoint.add_key_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")


def base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"URL {url!r} is not an http(s) URL; give one like {DEFAULT_URL}")
    path = parts.path.rstrip("/")
    path = path[: -len("/v1")] if path.endswith("/v1") else path
    return f"{parts.scheme}://{parts.netloc}{path}"


def parse_modalities(text: str) -> frozenset[str] | None:
    """None for 'auto' (probe), else the set of non-text inputs the model takes."""
    if text.strip() == "auto":
        return None
    named = {item.strip() for item in text.split(",") if item.strip()} - {"text"}
    unknown = named - set(MODALITIES)
    if unknown:
        raise UsageError(f"--modalities names {sorted(unknown)}; expected 'auto' or a comma list of "
                         f"text,{','.join(MODALITIES)}")
    return frozenset(named)


def select_checks(only: list[str] | None) -> tuple[tuple, tuple]:
    """The request checks and the /metrics rows to run."""
    if not only:
        return CHECKS, METRIC_ROWS
    names = [c.name for c in CHECKS] + list(METRIC_ROWS)
    unknown = [name for name in only if name not in names]
    if unknown:
        raise UsageError(f"--only names unknown check(s) {unknown}; the checks are {', '.join(names)}")
    return tuple(c for c in CHECKS if c.name in only), tuple(n for n in METRIC_ROWS if n in only)


def run(args: argparse.Namespace) -> int:
    try:
        url = base_url(args.url)
        modalities = parse_modalities(args.modalities)
        checks, metric_names = select_checks(args.only)
        if not all(valid_deadline(seconds) for seconds in
                   (args.timeout, args.connect_grace, args.interval, args.request_timeout)):
            raise UsageError("--timeout, --connect-grace, --interval and --request-timeout must be "
                             f"positive seconds, at most {MAX_DEADLINE_S:g} (a week)")
        api_key = endpoint.read_api_key(args.api_key_file)
        given = served_inputs.given_config(args.model_config) if args.model_config and modalities is None else None
    except UsageError as exc:
        print(f"smoke: {exc}", file=sys.stderr)
        return 2
    with EndpointClient(url, api_key) as client:
        readiness = wait_ready(client, timeout_s=args.timeout, interval_s=args.interval,
                               connect_grace_s=args.connect_grace, status=StatusLine())
        cards = ()
        if readiness.ready:
            try:
                status, cards = served_models(client, args.request_timeout)
                readiness = access(status, url, readiness, key_given=api_key is not None)
            except EndpointError as exc:
                readiness = stopped(readiness, "models", exc.line(), str(exc.status))
        model = args.model or (cards[0].id if cards else None)
        card = next((card for card in cards if card.id == model), None)
        max_model_len = card.max_model_len if card else None
        inputs = served_inputs.resolve(modalities, given, card, os.environ)
        rows = []
        if readiness.ready:
            for check in checks:
                rows.append(run_check(client, check, model, inputs, args.request_timeout,
                                      max_model_len,
                                      judge_answers=not args.contract_only,
                                      served=[card.id for card in cards],
                                      key_given=api_key is not None))
            if metric_names:
                text, why_not = read_metrics(client, args.request_timeout)
                rows += [metric_row(result) for result in metric_rows(text, why_not, max_model_len, not args.contract_only)
                         if result.name in metric_names]
    report = build_report(url, model, readiness, rows, inputs if readiness.ready else None)
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return 0 if report["ok"] else 1


def access(status: int | None, url: str, readiness: Readiness, key_given: bool) -> Readiness:
    """/health is open; the API behind a key is not: a 401/403 on GET /v1/models ends the run in
    one line (every check would fail the same way), naming the key to set or to check."""
    if status not in (401, 403):
        return readiness
    return stopped(readiness, "access", endpoint.status_cause(status, url + "/v1/models", key_given), str(status))


def stopped(readiness: Readiness, name: str, why: str, last: str) -> Readiness:
    """The run ends here, before the checks, with one line saying why."""
    return Readiness(Result(name, Status.FAIL, why), readiness.elapsed_s, last, readiness.polls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m buildtool.smoke", description=__doc__.splitlines()[0])
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except KeyboardInterrupt:
        print("smoke: interrupted", file=sys.stderr)
        return 130
