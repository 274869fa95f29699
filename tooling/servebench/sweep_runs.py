"""The sweep definition, its cells and runs, and the seed of every run (pure)."""
from __future__ import annotations

import dataclasses
import hashlib
import json

from door.problem import UsageError

DATASETS = ("random", "sharegpt")
FORMAT = 1


@dataclasses.dataclass(frozen=True)
class Sweep:
    """Everything that decides which prompts are sent: two endpoints compared must share it."""
    concurrencies: tuple[int, ...] = (1, 4, 8, 16)
    input_lens: tuple[int, ...] = (512, 4096)
    output_len: int | None = 128
    repeats: int = 3
    dataset: str = "random"
    dataset_file: str | None = None     # basename only: the file may live elsewhere on another host
    prompts_per_stream: int = 8
    num_prompts: int | None = None      # fixed count per run; overrides prompts_per_stream
    base_seed: int = 0

    def __post_init__(self):
        problems = []
        if self.dataset not in DATASETS:
            problems.append(f"dataset {self.dataset!r}, expected one of {', '.join(DATASETS)}")
        if not self.concurrencies or min(self.concurrencies) < 1:
            problems.append(f"concurrencies {list(self.concurrencies)}, expected positive integers")
        if self.dataset == "random" and (not self.input_lens or min(self.input_lens) < 1):
            problems.append(f"input lengths {list(self.input_lens)}, expected positive integers")
        if self.dataset == "random" and self.output_len is None:
            problems.append("no output length, the random dataset needs one")
        if self.output_len is not None and self.output_len < 1:
            problems.append(f"output length {self.output_len}, expected a positive integer")
        if self.repeats < 1 or self.prompts_per_stream < 1 or (self.num_prompts is not None and self.num_prompts < 1):
            problems.append("repeats, prompts per stream and prompt count must be positive")
        if self.dataset == "sharegpt" and not self.dataset_file:
            problems.append("dataset sharegpt without a dataset file")
        if problems:
            raise UsageError("; ".join(problems))

    @property
    def cell_input_lens(self) -> tuple[int | None, ...]:
        """ShareGPT prompts bring their own lengths: one input 'length' None."""
        return self.input_lens if self.dataset == "random" else (None,)

    def prompts_for(self, concurrency: int) -> int:
        return self.num_prompts or self.prompts_per_stream * concurrency

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["concurrencies"], d["input_lens"] = list(self.concurrencies), list(self.input_lens)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Sweep":
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - fields
        if unknown:
            raise UsageError(f"unknown sweep keys {sorted(unknown)}; expected {sorted(fields)}")
        d = dict(d)
        for key in ("concurrencies", "input_lens"):
            if key in d:
                d[key] = tuple(d[key])
        return cls(**d)

    def differences(self, other: "Sweep") -> list[str]:
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(other, f.name)]


@dataclasses.dataclass(frozen=True)
class Run:
    """One `vllm bench serve` invocation: a cell (concurrency x input length) and a repeat."""
    concurrency: int
    input_len: int | None
    output_len: int | None
    repeat: int
    num_prompts: int
    seed: int

    @property
    def cell(self) -> tuple[int, int | None]:
        return (self.concurrency, self.input_len)

    @property
    def name(self) -> str:
        inp = "sharegpt" if self.input_len is None else f"in{self.input_len}"
        out = "outds" if self.output_len is None else f"out{self.output_len}"
        return f"c{self.concurrency}-{inp}-{out}-r{self.repeat}"


def derive_seed(base_seed: int, *parts) -> int:
    """A seed that depends only on the sweep's base seed and the run's coordinates,
    so every endpoint compared sends the same prompts in every run."""
    key = json.dumps([base_seed, *parts]).encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big") & 0x7FFFFFFF


def runs(sweep: Sweep) -> list[Run]:
    """Every run of the sweep, repeats interleaved (all cells once, then again) so a slow
    drift of the server spreads over the cells instead of biasing the last ones."""
    out = []
    for repeat in range(sweep.repeats):
        for input_len in sweep.cell_input_lens:
            for c in sweep.concurrencies:
                seed = derive_seed(sweep.base_seed, sweep.dataset, input_len, sweep.output_len, c, repeat)
                out.append(Run(c, input_len, sweep.output_len, repeat, sweep.prompts_for(c), seed))
    return out


def warmup_seed(sweep: Sweep) -> int:
    return derive_seed(sweep.base_seed, "warmup")
