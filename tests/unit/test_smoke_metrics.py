"""After the requests: speculative-decoding acceptance and KV cache capacity read from vLLM's /metrics."""
import json

import pytest

from buildtool.smoke.command_line import main
from buildtool.smoke.metrics import kv_cache_row, parse_exposition, spec_decode_row
from contract.verdict import Status
from tests.support.openai_standin import OpenAIStandIn, vllm_metrics_text

FAST = ["--interval", "0.05", "--timeout", "10", "--json"]


def test_the_exposition_parser_reads_names_labels_and_values():
    samples = parse_exposition(vllm_metrics_text("google/gemma-4-E2B-it", drafts=10, accepted=25)
                               + 'odd{path="a\\"b,c=d"} 2 1700000000\nnot a sample line\n')
    by_name = {s.name: s for s in samples}
    assert by_name["vllm:spec_decode_num_drafts_total"].value == 10.0
    assert by_name["vllm:spec_decode_num_drafts_total"].labels == {"engine": "0",
                                                                   "model_name": "google/gemma-4-E2B-it"}
    info = by_name["vllm:cache_config_info"].labels
    assert info["kv_cache_size_tokens"] == "41536" and info["sliding_window"] == "None"
    assert by_name["odd"].labels == {"path": 'a"b,c=d'} and by_name["odd"].value == 2.0
    assert by_name["vllm:prompt_tokens_created"].value == 1.7645e9
    assert not any(s.name.startswith("#") or s.name == "not" for s in samples)


@pytest.mark.parametrize("drafts, accepted, status, words", [
    (100, 230, Status.PASS, "mean acceptance length 3.30 over 100 drafts"),
    (100, 180, Status.PASS, "mean acceptance length 2.80"),
    (100, 0, Status.FAIL, "mean acceptance length 1.00 over 100 drafts: the drafter is not drafting"),
    (100, 5, Status.FAIL, "1.05"),
    (0, 0, Status.NOT_JUDGED, "made no drafts"),
])
def test_acceptance_about_one_fails_saying_the_drafter_is_not_drafting(drafts, accepted, status, words):
    result = spec_decode_row(parse_exposition(vllm_metrics_text(drafts=drafts, accepted=accepted)))
    assert result.status is status and words in result.message
    if status is Status.FAIL:
        assert "quantized" in result.fix and "bf16" in result.fix


def test_acceptance_sums_the_engines_and_is_not_judged_on_contract_only():
    text = vllm_metrics_text(drafts=50, accepted=0) + vllm_metrics_text(drafts=50, accepted=10).replace(
        'engine="0"', 'engine="1"')
    assert "over 100 drafts" in spec_decode_row(parse_exposition(text)).message
    assert spec_decode_row(parse_exposition(text), judge_answers=False).status is Status.NOT_JUDGED


def test_no_drafter_is_a_skip():
    result = spec_decode_row(parse_exposition(vllm_metrics_text()))
    assert result.status is Status.SKIP and "no drafter configured" in result.message


def test_kv_cache_capacity_from_vllms_own_figures_or_from_the_blocks():
    result = kv_cache_row(parse_exposition(vllm_metrics_text()), 8192)
    assert result.status is Status.PASS
    assert result.message == "KV cache 41,536 tokens; maximum concurrency 5.07x at max_model_len 8192"
    older = kv_cache_row(parse_exposition(vllm_metrics_text(tokens="None", concurrency="None", blocks="128")), 256)
    assert older.message == "KV cache 2,048 tokens; maximum concurrency 8.00x at max_model_len 256"
    unset = kv_cache_row(parse_exposition(vllm_metrics_text(tokens="None", concurrency="None", blocks="None")), 256)
    assert unset.status is Status.SKIP
    assert kv_cache_row(parse_exposition("# nothing\n"), 256).status is Status.SKIP


def test_smoke_reports_a_drafter_that_is_not_drafting_and_exits_1(capsys):
    with OpenAIStandIn() as standin:
        standin.metrics_text = vllm_metrics_text(standin.model, drafts=40, accepted=0)
        code = main([standin.url, *FAST, "--only", "arithmetic", "--only", "spec-decode", "--only", "kv-cache"])
    report = json.loads(capsys.readouterr().out)
    rows = {c["name"]: c for c in report["checks"]}
    assert code == 1 and list(rows) == ["arithmetic", "spec-decode", "kv-cache"]
    assert rows["spec-decode"]["status"] == "fail" and "not drafting" in rows["spec-decode"]["message"]
    assert rows["kv-cache"]["status"] == "pass" and "41,536 tokens" in rows["kv-cache"]["message"]


def test_a_server_without_metrics_skips_both_rows(capsys):
    with OpenAIStandIn() as standin:
        del standin.routes[("GET", "/metrics")]
        code = main([standin.url, *FAST, "--only", "spec-decode", "--only", "kv-cache"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(c["status"], c["message"]) for c in report["checks"]] == [
        ("skip", "GET /metrics answered 404"), ("skip", "GET /metrics answered 404")]
