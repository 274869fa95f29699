"""Several servers on one host, one per env file: their names, ports, GPUs and memory fractions.

`plan_servers` is a pure function of typed values (each env file parsed once, at the edge, by the
entrypoint's own settings parser; its model folder sized where readable). It refuses in one line,
before anything is written, when two servers would serve one name, or when the fractions of a GPU
sum above CARD_BUDGET; names and ports are one namespace, judged with the sidecars' by
buildtool/units/namespace.py once the plan has named every server. The card's memory is not known
at render time, so the rule is over fractions: vLLM's GPU_MEMORY_UTILIZATION is a fraction of the
card's total memory, and what the fractions leave (5 %) is for what no server counts: the driver's
reserve, a display.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from buildtool.units.spec import UNIT_NAME, ServerValues
from contract.devices import SHARED_CARD_BUDGET, VLLM_DEFAULT_UTILIZATION
from door.problem import UsageError
from entrypoint.checks.memory import gpu_need
from entrypoint.settings import Settings

CARD_BUDGET = SHARED_CARD_BUDGET  # the most the fractions of one GPU may sum to
ALONE_FRACTION = VLLM_DEFAULT_UTILIZATION  # what a server alone on its GPUs gets
MIN_FRACTION = 0.05  # below it vLLM cannot hold a model's weights and a KV block on any card here
# vLLM 0.33.0's max_num_seqs for the OpenAI server when MAX_NUM_SEQS is unset.
DEFAULT_MAX_NUM_SEQS = 256
MAX_SLUG = 40  # vllm-turing-<slug> stays a Kubernetes name (63 characters at most)


@dataclass(frozen=True)
class ModelSize:
    """What the model folder says of a server's GPU need, read at render time."""

    weight_bytes: int
    kv_per_token: int
    max_len: int  # tokens of one sequence: MAX_MODEL_LEN, else the model's own limit


@dataclass(frozen=True)
class ServerInput:
    source: str  # the env file as the user named it
    settings: Settings
    gpus: tuple[int, ...]
    port: int
    size: ModelSize | None
    unsized: str = ""  # why size is None (the model folder is not readable here)


@dataclass(frozen=True)
class PlannedServer:
    input: ServerInput
    values: ServerValues
    fraction: float


def slug(source: str) -> str:
    """The env file's name without directory and suffix, as a name part: `conf/Chat.env` -> `chat`."""
    stem = source.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:MAX_SLUG].strip("-") or "server"


def distinct_slugs(sources: list[str]) -> list[str]:
    """One name part per env file, deterministic: the file's slug, with its position appended where
    two files share one (`a/chat.env`, `b/chat.env` -> `chat-1`, `chat-2`)."""
    slugs = [slug(source) for source in sources]
    return [s if slugs.count(s) == 1 else f"{s}-{i + 1}" for i, s in enumerate(slugs)]


def need(server: ServerInput) -> int | None:
    """GPU bytes the server wants on each of its GPUs (tensor parallel splits weights and KV)."""
    if server.size is None:
        return None
    size = server.size
    tokens = size.max_len * (server.settings.max_num_seqs or DEFAULT_MAX_NUM_SEQS)
    return math.ceil(gpu_need(size.weight_bytes, size.kv_per_token, tokens) / len(server.gpus))


def _floor(fraction: float) -> float:
    return math.floor(fraction * 100 + 1e-9) / 100


def plan_fractions(servers: list[ServerInput]) -> list[float]:
    """GPU_MEMORY_UTILIZATION per server: the env file's, else a share of what the explicit ones
    leave on its GPUs, in proportion to each unset server's need there (the smallest share over its
    GPUs, rounded down to a hundredth), at most ALONE_FRACTION. UsageError when a GPU is over-committed."""
    explicit = {gpu: 0.0 for s in servers for gpu in s.gpus}
    weights = dict.fromkeys(explicit, 0)
    for server in servers:
        for gpu in server.gpus:
            if server.settings.gpu_memory_utilization is not None:
                explicit[gpu] += server.settings.gpu_memory_utilization
            else:
                weights[gpu] += need(server) or 0
    fractions = []
    for server in servers:
        chosen = server.settings.gpu_memory_utilization
        if chosen is None:
            wanted = need(server)
            if wanted is None:
                raise UsageError(f"{server.source}: GPU_MEMORY_UTILIZATION is unset and its model cannot be sized "
                                f"here ({server.unsized}); set GPU_MEMORY_UTILIZATION in {server.source} "
                                f"(the fractions of a GPU may sum to {CARD_BUDGET})")
            chosen = min(ALONE_FRACTION, *(_floor((CARD_BUDGET - explicit[gpu]) * wanted / weights[gpu])
                                           for gpu in server.gpus))
        fractions.append(chosen)
    _refuse_over_commit(servers, fractions)
    return fractions


def _refuse_over_commit(servers: list[ServerInput], fractions: list[float]) -> None:
    fix = ("lower GPU_MEMORY_UTILIZATION in those env files (or leave it unset: the render sizes it) or put a "
           "server on another GPU (--gpus once per --env-file)")
    for gpu in sorted({gpu for s in servers for gpu in s.gpus}):
        on_gpu = [(s, f) for s, f in zip(servers, fractions) if gpu in s.gpus]
        total = sum(f for _, f in on_gpu)
        shares = " + ".join(f"{f:g} ({s.source})" for s, f in on_gpu)
        if small := [s.source for s, f in on_gpu if f < MIN_FRACTION]:
            raise UsageError(f"GPU {gpu}: {', '.join(small)} would get less than {MIN_FRACTION} of the card "
                            f"(GPU_MEMORY_UTILIZATION {shares}); {fix}")
        if total > CARD_BUDGET + 1e-9:
            raise UsageError(f"GPU {gpu} is over-committed: GPU_MEMORY_UTILIZATION {shares} = {total:.2f}, above "
                            f"the {CARD_BUDGET} of a card the fractions may sum to; {fix}")


def _refuse_served_collisions(servers: list[ServerInput], served: list[str]) -> None:
    """Two servers of one host answer to distinct model names. Two names both defaulted to the env
    files' names are equal only where the units' names are: buildtool/units/namespace.py refuses
    that clash, naming what the user can change (the files' names)."""
    for i, name in enumerate(served):
        for j in range(i):
            explicit = servers[i].settings.served_model_name or servers[j].settings.served_model_name
            if served[j] == name and explicit:
                raise UsageError(f"{servers[j].source} and {servers[i].source} both use the served model name {name}; "
                                f"set a distinct SERVED_MODEL_NAME in {servers[i].source}")


def plan_servers(servers: list[ServerInput]) -> list[PlannedServer]:
    """The servers' names, environment and fractions; UsageError (exit 2, one line naming the env file(s) and the fix) when they cannot share."""
    slugs = distinct_slugs([s.source for s in servers])
    served = [s.settings.served_model_name or name for s, name in zip(servers, slugs)]
    _refuse_served_collisions(servers, served)
    fractions = plan_fractions(servers)
    planned = []
    for server, name, served_name, fraction in zip(servers, slugs, served, fractions):
        values = ServerValues(name=f"{UNIT_NAME}-{name}", service=name, env_file=f"{UNIT_NAME}-{name}.env",
                              volume_prefix=f"{name}-",
                              variable_prefix=f"VLLM_TURING_{name.upper().replace('-', '_')}",
                              settings=(("SERVED_MODEL_NAME", served_name),
                                        ("GPU_MEMORY_UTILIZATION", f"{fraction:g}")),
                              stop_grace_s=server.settings.stop_grace_s,
                              idle_after_s=server.settings.idle_after_s)
        planned.append(PlannedServer(server, values, fraction))
    return planned
