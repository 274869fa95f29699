"""Serving benchmarks: a concurrency x prompt-length sweep of `vllm bench serve` runs."""
