"""What every part of the fit check shares, below all of them: its errors, the dtypes, and what a model
family gives the registry (families/). Standard library only, as the entrypoint imports it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from contract import devices
from contract.model_config import ConfigProblem


class UnprovenLayers(ConfigProblem):
    """A model with layers that run kernels the fit check does not record (an unread mixer, an encoder
    it cannot read): it must not say the model fits."""


@dataclass(frozen=True)
class Refusal:
    """Why vLLM cannot serve a model on a device whatever the clamp does, and what the operator can do."""

    reason: str
    fix: str


# The activations' dtype of the recorded launches: float16 by default (Turing has no bf16, and vLLM casts
# a bf16 checkpoint to it there); bfloat16 is what an Ampere GPU runs a bf16 checkpoint in.
DEFAULT_DTYPE = "float16"
DTYPES = ("float16", "bfloat16", "float32")
BF16_MIN_CC = devices.cc_number(devices.BF16_MIN_CC)
TENSOR_PARALLEL_SIZES = (1, 2, 4)  # the per-rank shapes the built-in matrix proves


def never(*_args) -> None:
    """A family rule that never applies."""
    return None


@dataclass(frozen=True)
class Family:
    """One model family of the proof, as the registry (families/) loops over them:

    role        "attention": its layers are attention layers (LayerShape) its `matrix` lists;
                "mixer": a model of one of its `model_types` (or carrying hybrid fields) has one mixer, `read`;
                "latent": a model whose text section `claims` has one latent attention, `read`;
                "refusal": it makes no shape, its `config_refused_on` refuses models vLLM cannot serve.
    read        (text Section, model type, model, where, tensor parallel, dtype) -> its shape
    record      (shape, cc, limit, dtype) -> the shape's launches (vLLM's ops on CPU tensors)
    refused_on / unrecorded_on   (shape, cc) -> a Refusal / why the recorded launches are not the device's
    config_refused_on            (ModelConfig, model, where, tensor parallel, cc) -> a Refusal
    A family that records its own launches (a mixer, latent attention) keeps them beside its reader, in
    families/<family>/launches.py, imported by its `record` only (the registry stays stdlib-only).
    """

    name: str
    role: str
    description: str  # what a shape of it is called in messages ("Mamba-2 mixer")
    proves: str = ""  # how the preflight names what the proof covers ("" when another family says it)
    reads_phrase: str = ""  # for a mixer: which model types it reads, in a message about one it does not
    shape_type: type | None = None
    model_types: tuple[str, ...] = ()  # mixer: the model types it reads
    mixer_types: tuple[str, ...] = ()  # model types that always have a mixer (even without hybrid fields)
    attention_free_types: tuple[str, ...] = ()  # model types without attention layers
    claims: Callable | None = None  # latent: (text Section) -> whether the model has it
    read: Callable | None = None
    record: Callable | None = None
    host_dependent: bool = False  # its kernels' lists are decided at import from the host (FLA)
    describe: Callable = str  # (shape) -> what sizes its kernels, for a miss
    refused_on: Callable = never
    unrecorded_on: Callable = never
    config_refused_on: Callable = never
    replayssm_unproven: Callable = never  # (model type, --replayssm-buffer-len) -> what ReplaySSM runs unproven
    builtin: Mapping[str, dict] = None  # the matrix's models of the family (config.json dicts), at TP 1, 2, 4
    matrix: Callable | None = None  # (dtype) -> fixed shapes it adds to the built-in matrix
    order: int = 100  # place in the registry: matrix order, and which rule is asked first


# Hybrid and state-space types whose mixers run kernels the fit check does not record: each stays
# "not proven", named. vLLM 0.33.0's registry lists PLaMo 2 and MiniMax-Text-01 / M1 as supported only
# until 0.26.0 and 0.23.0 (_PREVIOUSLY_SUPPORTED_MODELS), as it does Bamba (0.23.0), whose mixer the
# check reads like the other Mamba-2 hybrids'.
UNREAD_MIXERS = {
    "plamo2": "PLaMo 2's Mamba mixers (a model class vLLM 0.33.0 no longer has: its last release with one is 0.26.0)",
    "minimax_m1": "MiniMax's lightning attention kernels (a model class vLLM 0.33.0 no longer has: its last release "
                  "with one is 0.23.0)",
}


class RecordedShape:
    """What every shape a family records itself (a mixer, latent attention) has: a model and a layer name
    (fields of its dataclass), `mixer`, its kind's name, and FIELDS, the names of the fields that size its
    kernels (the first `mixer`): its verdicts' key in the fit table (fit_table.py)."""

    model: str
    layer: str
    mixer: str
    FIELDS: tuple = ()

    @property
    def label(self) -> str:
        return f"{self.model}/{self.layer}"

    @property
    def head_size(self) -> int:  # the report's column: the head dim where the shape has one
        return self.head_dim


def fields_by_kind() -> dict[str, tuple]:
    """{kind: FIELDS} of every RecordedShape class defined (a family's module defines its own)."""
    found, pending = {}, [RecordedShape]
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if cls.FIELDS and isinstance(getattr(cls, "mixer", None), str):
            found.setdefault(cls.mixer, cls.FIELDS)
    return found
