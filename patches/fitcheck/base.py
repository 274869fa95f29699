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
    builtin: Mapping[str, dict] = None  # the matrix's models of the family (config.json dicts), at TP 1, 2, 4
    matrix: Callable | None = None  # (dtype) -> fixed shapes it adds to the built-in matrix
    order: int = 100  # place in the registry: matrix order, and which rule is asked first
