"""bench/two_models' pure part (tooling/servebench/pair.py): each phase's figures from the client's token
times worked out by hand here, the table, the plot's data, and its refusals of bad options; the
servers themselves run in bench/two_models only (docs/benchmarks.md)."""
import json

import pytest
from hypothesis import example, given, strategies as st

from tooling.servebench import pair
from tooling.servebench.depth import StreamTiming
from tooling import two_models

WORKLOAD = pair.Workload(requests=3, concurrency=2, prompt_tokens=32, output_tokens=5)


def streamed(sent: float, first: float, last: float, tokens: int = 5, events: int = 5, spaced: int = 4) -> StreamTiming:
    return StreamTiming(prompt_tokens=32, completion_tokens=tokens, first_s=first, last_s=last, sent_s=sent,
                        events=events, spaced=spaced)


FAILED = StreamTiming(0, 0, None, None, 0.5, error="HTTP 500")


def test_a_phase_summarized_from_its_requests_token_times():
    phase = pair.Phase("model-a", pair.ALONE, (
        streamed(0.0, 0.10, 0.50),                       # TPOT 0.1 s, ITL 0.1 s
        streamed(0.0, 0.20, 1.00, events=3, spaced=2),    # two tokens per event: TPOT 0.2 s, ITL 0.4 s
        streamed(1.0, 0.30, 0.70),                       # ends last, at 1.7 s
        FAILED), server_tpot_s=0.125)
    row = pair.summarize(phase)
    assert (row.requests, row.failed) == (4, 1)
    assert row.ttft_ms_median == pytest.approx(200)
    assert row.ttft_ms_p90 == pytest.approx(280)          # between 200 and 300, 0.8 of the way
    assert row.tpot_ms_median == pytest.approx(100)       # of 100, 200, 100
    assert row.itl_ms_median == pytest.approx(100)        # of 100, 400, 100
    assert row.server_tpot_ms == pytest.approx(125)
    assert row.output_tok_s == pytest.approx(15 / 1.7)    # three requests' tokens from 0 s to 1.7 s
    assert row.requests_s == pytest.approx(3 / 1.7)


def test_a_burst_has_no_decode_time_and_the_table_says_so():
    burst = streamed(0.0, 0.10, 0.1001, spaced=0)
    row = pair.summarize(pair.Phase("model-a", pair.BOTH_BUSY, (burst,)))
    assert row.tpot_ms_median is None and row.itl_ms_median is None and row.server_tpot_ms is None
    line = next(l for l in pair.render([row], WORKLOAD, "here.").splitlines() if l.startswith("| model-a"))
    assert line.split(" | ")[4:7] == ["—", "—", "—"]


def test_a_phase_whose_every_request_failed_has_no_rates():
    row = pair.summarize(pair.Phase("model-b", pair.ALONE, (FAILED, FAILED)))
    assert (row.failed, row.output_tok_s, row.requests_s, row.ttft_ms_median) == (2, None, None, None)


def rows_of(*keys):
    return [pair.summarize(pair.Phase(model, condition, (streamed(0.0, 0.1 * (i + 1), 0.5 + 0.1 * i),)))
            for i, (model, condition) in enumerate(keys)]


def test_the_table_and_the_plot_order_models_as_measured_and_conditions_as_defined():
    rows = rows_of(("model-a", pair.BOTH_BUSY), ("model-b", pair.ALONE), ("model-a", pair.ALONE),
                   ("model-b", pair.BOTH_BUSY))
    lines = [l for l in pair.render(rows, WORKLOAD, "here.").splitlines() if l.startswith("| model-")]
    assert [l.split(" | ")[:2] for l in lines] == [["| model-a", "alone"], ["| model-a", "both busy"],
                                                   ["| model-b", "alone"], ["| model-b", "both busy"]]
    panels = pair.panels(rows)
    assert [p.title for p in panels] == [title for title, _, _ in pair.PANELS]
    ttft = panels[0]
    assert ttft.models == ("model-a", "model-b")
    assert [c for c, _ in ttft.series] == [pair.ALONE, pair.BOTH_BUSY]   # "other idle" was not measured
    by_key = {(r.model, r.condition): r for r in rows}
    assert dict(ttft.series)[pair.ALONE] == (by_key["model-a", pair.ALONE].ttft_ms_median,
                                             by_key["model-b", pair.ALONE].ttft_ms_median)


def test_a_condition_one_model_lacks_is_none_in_the_plot_not_zero():
    panels = pair.panels(rows_of(("model-a", pair.ALONE), ("model-a", pair.OTHER_IDLE), ("model-b", pair.ALONE)))
    assert dict(panels[2].series)[pair.OTHER_IDLE][1] is None


def test_the_json_holds_every_row_and_the_workload():
    rows = rows_of(("model-a", pair.ALONE), ("model-b", pair.ALONE))
    data = json.loads(pair.to_json(rows, WORKLOAD, "here."))
    assert data["workload"]["requests"] == 3
    assert [r["model"] for r in data["rows"]] == ["model-a", "model-b"]


def test_the_plot_is_written_from_the_panels(tmp_path):
    from tooling.servebench import plot

    rows = rows_of(("model-a", pair.ALONE), ("model-b", pair.OTHER_IDLE))
    path = plot.pair_png(pair.panels(rows), "two models", tmp_path / "two.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


timings = st.builds(
    StreamTiming, prompt_tokens=st.integers(0, 4096), completion_tokens=st.integers(0, 4096),
    first_s=st.none() | st.floats(0, 1e4), last_s=st.none() | st.floats(0, 1e4), sent_s=st.floats(0, 1e4),
    error=st.none() | st.just("HTTP 500"), events=st.integers(0, 4096), spaced=st.integers(0, 4096))


@given(st.lists(st.tuples(st.sampled_from(two_models.MODELS), st.sampled_from(pair.CONDITIONS),
                          st.lists(timings, max_size=6)), max_size=6))
@example([("model-a", pair.ALONE, [StreamTiming(0, 0, first_s=0.0, last_s=None)])])  # a first token, no last: not done
def test_any_phases_give_a_table_and_panels_with_a_value_per_model(phases):
    rows = [pair.summarize(pair.Phase(model, condition, tuple(ts))) for model, condition, ts in phases]
    for row in rows:
        assert 0 <= row.failed <= row.requests
        assert row.output_tok_s is None or row.output_tok_s >= 0
    text = pair.render(rows, WORKLOAD, "here.")
    assert sum(l.startswith("| model-") for l in text.splitlines()) == len(rows)
    for panel in pair.panels(rows):
        assert all(len(values) == len(panel.models) for _, values in panel.series)


@pytest.mark.parametrize("argv, named", [
    (["--requests", "0"], "--requests"),
    (["--concurrency", "65"], "--concurrency"),
    (["--prompt-tokens", "x"], "--prompt-tokens"),
    (["--prompt-tokens", "1000", "--output-tokens", "100"], "--prompt-tokens"),
    ([], "--out"),
])
def test_bad_options_are_refused_in_one_line_naming_the_flag(argv, named, capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:
        two_models.main((["--out", str(tmp_path)] if argv else []) + argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and named in err


def test_an_out_folder_that_cannot_be_made_is_refused_naming_it(capsys, tmp_path):
    (tmp_path / "file").write_text("")
    assert two_models.main(["--out", str(tmp_path / "file" / "sub")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--out" in err
