"""The `docker run ... vllm bench serve` command line of one run (pure)."""
from __future__ import annotations

import dataclasses
import json
import pathlib

from contract import pins

from .sweep_runs import Run, Sweep

RESULTS_IN_CONTAINER = "/results"
TOKENIZER_IN_CONTAINER = "/tokenizer"
DATA_IN_CONTAINER = "/data"
HF_HOME_IN_CONTAINER = "/hf"
# Passed through from the host when set: credentials and offline switches for the
# tokenizer download, the API key `vllm bench serve` sends as a bearer token.
PASSTHROUGH_ENV = ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "TRANSFORMERS_OFFLINE", "OPENAI_API_KEY")
CONTAINER_LABEL = "io.vllm-turing.bench"


@dataclasses.dataclass(frozen=True)
class Target:
    """The endpoint under test and the client image that measures it."""
    base_url: str
    model: str
    tokenizer: str                       # a local folder (mounted) or a Hugging Face id
    image: str = pins.IMAGE_TAG
    hf_home: str | None = None
    endpoint: str = "/v1/completions"


def tokenizer_mount(tokenizer: str) -> tuple[list[str], str]:
    """(-v args, the tokenizer argument inside the container)."""
    path = pathlib.Path(tokenizer)
    if path.is_dir():
        return ["-v", f"{path.resolve()}:{TOKENIZER_IN_CONTAINER}:ro"], TOKENIZER_IN_CONTAINER
    return [], tokenizer


def cache_salt(session: str, run_name: str) -> str:
    """vLLM's prefix cache keys blocks by (salt, tokens): a salt new for every run of every
    invocation means no request is served from blocks an earlier run left behind, while the
    prompt text itself stays the seed's (identical across endpoints)."""
    return f"{session}-{run_name}"


def docker_argv(*, sweep: Sweep, run: Run, target: Target, results_dir: pathlib.Path,
                partial_name: str, salt: str, container_name: str, env: dict[str, str],
                user: str | None, dataset_path: pathlib.Path | None) -> list[str]:
    argv = ["docker", "run", "--rm", "--name", container_name, "--label", CONTAINER_LABEL,
            "--network", "host", "--entrypoint", "vllm",
            "-e", "HOME=/tmp", "-e", "VLLM_NO_USAGE_STATS=1", "-e", "DO_NOT_TRACK=1",
            "-v", f"{results_dir.resolve()}:{RESULTS_IN_CONTAINER}"]
    if user:
        argv += ["--user", user]
    for key in PASSTHROUGH_ENV:
        if env.get(key):
            argv += ["-e", key]   # value taken from the docker client's environment, not the argv
    if target.hf_home:
        argv += ["-v", f"{pathlib.Path(target.hf_home).resolve()}:{HF_HOME_IN_CONTAINER}",
                 "-e", f"HF_HOME={HF_HOME_IN_CONTAINER}"]
    mounts, tokenizer = tokenizer_mount(target.tokenizer)
    argv += mounts
    if dataset_path is not None:
        argv += ["-v", f"{dataset_path.resolve()}:{DATA_IN_CONTAINER}/{dataset_path.name}:ro"]
    argv.append(target.image)
    argv += bench_args(sweep=sweep, run=run, target=target, tokenizer=tokenizer,
                       result_filename=partial_name, salt=salt,
                       dataset_in_container=f"{DATA_IN_CONTAINER}/{dataset_path.name}" if dataset_path else None)
    return argv


def bench_args(*, sweep: Sweep, run: Run, target: Target, tokenizer: str, result_filename: str | None,
               salt: str, dataset_in_container: str | None) -> list[str]:
    """Arguments of `vllm bench serve` for one run."""
    args = ["bench", "serve", "--backend", "openai", "--base-url", target.base_url,
            "--endpoint", target.endpoint, "--model", target.model, "--tokenizer", tokenizer,
            "--seed", str(run.seed), "--num-prompts", str(run.num_prompts),
            "--max-concurrency", str(run.concurrency), "--request-rate", "inf",
            # greedy on both sides of an A/B: otherwise each image's generation_config decides
            "--temperature", "0",
            "--extra-body", json.dumps({"cache_salt": salt}),
            # the ready check and warm-ups send the run's first prompt ahead of the run, which
            # would then hit the prefix cache; off by default in 0.33, not in earlier releases
            "--ready-check-timeout-sec", "0", "--num-warmups", "0",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm"]
    if sweep.dataset == "random":
        args += ["--dataset-name", "random", "--random-input-len", str(run.input_len),
                 "--random-output-len", str(run.output_len), "--random-range-ratio", "0",
                 # a shared prefix would be served from the cache after the first request
                 "--random-prefix-len", "0"]
    else:
        args += ["--dataset-name", "sharegpt", "--dataset-path", dataset_in_container]
        if run.output_len is not None:
            args += ["--sharegpt-output-len", str(run.output_len), "--ignore-eos"]
    if result_filename is not None:
        args += ["--save-result", "--save-detailed", "--result-dir", RESULTS_IN_CONTAINER,
                 "--result-filename", result_filename,
                 "--metadata", f"run={run.name}", f"seed={run.seed}", f"repeat={run.repeat}",
                 f"cache_salt={salt}", f"base_url={target.base_url}"]
    return args
