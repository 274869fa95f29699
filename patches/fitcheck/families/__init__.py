"""The proof's model families, one module per family in this package, each defining FAMILY (a
family.Family): its shapes read from the typed config, its launches, its description and its
compute-capability rules. The registry finds them by listing the package (pkgutil), so adding a family
is adding its module (docs/architecture.md, "Adding a family"); every function below loops over them.

Standard library only until a family records its launches (that imports vLLM)."""
from __future__ import annotations

import importlib
import pkgutil
import reprlib

from contract.model_config import ConfigProblem, ModelConfig, Section, parse_config
from patches.fitcheck import attention
from patches.fitcheck.attention import LayerShape
from patches.fitcheck.family import (DEFAULT_DTYPE, TENSOR_PARALLEL_SIZES, UNREAD_MIXERS, Family, Refusal, UnprovenLayers,
                                   never)

ROLES = ("attention", "mixer", "latent", "refusal")
MATRICES = ("all", "attention", "gemma4")  # what the fit check runs without --model-config
MATRIX_FAMILIES = {"gemma4": ("gemma4",)}  # a matrix of some families alone (the others: every family)


def discover() -> tuple[Family, ...]:
    """Every FAMILY of the modules on this package's path, in registry order (Family.order, then name)."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        family = getattr(importlib.import_module(f"{__name__}.{info.name}"), "FAMILY", None)
        if isinstance(family, Family):
            if family.role not in ROLES:
                raise ValueError(f"family {family.name!r}: role {family.role!r} is not one of {', '.join(ROLES)}")
            found.append(family)
    return tuple(sorted(found, key=lambda family: (family.order, family.name)))


FAMILIES = discover()


def of_role(role: str) -> tuple[Family, ...]:
    return tuple(family for family in FAMILIES if family.role == role)


def family_of(shape) -> Family:
    """The family whose shapes are of this shape's type (the first in order: the attention families share
    LayerShape, and its rules)."""
    for family in FAMILIES:
        if family.shape_type is not None and isinstance(shape, family.shape_type):
            return family
    raise TypeError(f"no family makes {type(shape).__name__} shapes")


def is_mixer(shape) -> bool:
    """Whether a shape's launches are recorded by its family (a mixer or latent attention) rather than fed
    to the attention launcher (a LayerShape)."""
    return not isinstance(shape, LayerShape)


def _mixer_types() -> set[str]:
    return {kind for family in FAMILIES for kind in family.mixer_types} | set(UNREAD_MIXERS)


def has_mixer(text: Section, model_type: str) -> bool:
    """Whether a text section's model has Mamba / linear-attention mixers."""
    return model_type in _mixer_types() or bool(attention.hybrid_fields(text))


def mixer_family(text: Section, model_type: str) -> Family | None:
    """The family of a model's mixer: None for a model without one, UnprovenLayers for a type none reads."""
    if not has_mixer(text, model_type):
        return None
    for family in of_role("mixer"):
        if model_type in family.model_types:
            return family
    what = UNREAD_MIXERS.get(model_type, f"model type {reprlib.repr(model_type)}: its state-space layers")
    raise UnprovenLayers(f"{text.where}: a hybrid model with {what}: the fit check does not record these kernels "
                         f"for this device (it reads {_listed([f.reads_phrase for f in of_role('mixer')], ' and')})")


def _listed(phrases: list[str], last: str) -> str:
    """'a, b and c' of the non-empty phrases."""
    phrases = [phrase for phrase in phrases if phrase]
    return f"{', '.join(phrases[:-1])}{last} {phrases[-1]}" if len(phrases) > 1 else "".join(phrases)


def _latent_family(text: Section) -> Family | None:
    return next((family for family in of_role("latent") if family.claims(text)), None)


def attention_layers(config: ModelConfig, model: str, where: str, tensor_parallel: int = 1) -> list[LayerShape]:
    """One rank's attention layer kinds of a model's config (a mixer or latent attention it has is read
    too, so a model the check cannot prove is refused here)."""
    return [shape for shape in model_layers(config, model, where, tensor_parallel) if not is_mixer(shape)]


def latent_attention(config: ModelConfig, model: str, where: str, tensor_parallel: int = 1):
    """The latent attention of a model's config (its family's shape), None for a model without it."""
    family = _latent_family(config.text)
    return None if family is None else family.read(config.text, config.type_of_text, model, where, tensor_parallel,
                                                   DEFAULT_DTYPE)


def mixer_from_config(config: ModelConfig, model: str, where: str, tensor_parallel: int = 1,
                      dtype: str = DEFAULT_DTYPE):
    """The mixer of a model's config (its family's shape), else its latent attention, None for neither."""
    family = mixer_family(config.text, config.type_of_text)
    if family is not None:
        return family.read(config.text, config.type_of_text, model, where, tensor_parallel, dtype)
    return latent_attention(config, model, where, tensor_parallel)


def model_layers(config: ModelConfig, model: str, where: str, tensor_parallel: int = 1,
                 dtype: str = DEFAULT_DTYPE) -> list:
    """One rank's attention layer shapes of a model's config, its latent attention and its mixer last
    where it has them: what the fit check proves for the model. Each family reads the config once."""
    text, model_type = attention.text_section(config)
    family = mixer_family(text, model_type)
    mixer = None if family is None else family.read(config.text, model_type, model, where, tensor_parallel, dtype)
    if family is not None and model_type in family.attention_free_types:
        latent = latent_attention(config, model, where, tensor_parallel)
        return [shape for shape in (latent, mixer) if shape]
    if family is not None:
        text = attention.hybrid_attention(text)
    attention.refuse_unread_encoder(text, model_type)
    latent_family = _latent_family(text)
    if latent_family is None:
        return attention.attention_shapes(text, model_type, model, tensor_parallel, hybrid=family is not None) + (
            [mixer] if mixer else [])
    # every attention layer is latent: the latent family's shape (Kimi Linear: KDA beside latent attention)
    latent = latent_family.read(config.text, model_type, model, where, tensor_parallel, DEFAULT_DTYPE)
    attention.attention_kinds_only(text)
    return [shape for shape in (latent, mixer) if shape]


def load_model_config(path, tensor_parallel: int = 1, dtype: str = DEFAULT_DTYPE) -> list:
    """model_layers() of the config.json at `path` (ConfigProblem: one-line reason)."""
    from pathlib import Path

    path = Path(path)
    return model_layers(attention.read_config(path), path.parent.name or path.stem, str(path), tensor_parallel, dtype)


def builtin_models() -> dict[str, dict]:
    """The matrix's models with a mixer or latent attention, by name (config.json dicts)."""
    return {name: config for family in FAMILIES for name, config in (family.builtin or {}).items()}


def builtin_shapes(matrix: str = "all", dtype: str = DEFAULT_DTYPE) -> list:
    """Each family's fixed shapes (the Gemma 4 classes at tensor parallel 1, 2 and 4, the attention-only
    families' layers, the encoder layers) and its models (hybrids, state-space, latent attention) at tensor
    parallel 1, 2 and 4 where vLLM accepts the split; "gemma4" the Gemma 4 classes alone, "attention"
    "all" without the mixers, whose ops import vLLM's runtime (a bare GPU site of vLLM's Python files,
    tooling/gpu_site.py, lacks its dependencies)."""
    return [shape for _, shape in builtin_by_family(matrix, dtype)]


def builtin_by_family(matrix: str = "all", dtype: str = DEFAULT_DTYPE) -> list[tuple[str, object]]:
    """builtin_shapes() in its order, each with the name of the family that put it in the matrix (a hybrid's
    attention layers are its mixer family's, not the attention family whose rules they share)."""
    chosen = [family for family in FAMILIES if family.name in MATRIX_FAMILIES.get(matrix, (family.name,))]
    fixed = [(family.name, shape) for family in chosen if family.matrix for shape in family.matrix(dtype)]
    models = []
    for family in chosen:
        for name, found in (family.builtin or {}).items():
            where = f"built-in {name}"
            config = parse_config(found, where)
            for tp in TENSOR_PARALLEL_SIZES:
                model = name if tp == 1 else f"{name}-tp{tp}"
                try:
                    models += [(family.name, shape) for shape in model_layers(config, model, where, tp, dtype)]
                except ConfigProblem:
                    continue  # a split vLLM refuses (heads that do not divide): nothing to prove
    if matrix == "attention":
        models = [(name, shape) for name, shape in models if not is_mixer(shape)]
    return fixed + models


def charged_to(shape, origins: dict) -> str:
    """The family a shape's cost is charged to: the one that put it in the built-in matrix (`origins`, shape ->
    name, from builtin_by_family), else the one whose shapes are of its type (a --model-config model's)."""
    return origins.get(shape) or family_of(shape).name


def config_refused_on(config: ModelConfig, model: str, where: str, tensor_parallel: int,
                      cc: int) -> Refusal | None:
    """The Refusal of a model vLLM cannot serve on a device of compute capability `cc` whatever its layers
    (asked before they are read, so a model the check cannot prove is still refused)."""
    return next((refusal for family in FAMILIES if family.config_refused_on is not never
                 if (refusal := family.config_refused_on(config, model, where, tensor_parallel, cc)) is not None), None)


def refused_on(shapes, cc: int) -> Refusal | None:
    """The Refusal of the first of these shapes vLLM cannot run on a device of compute capability `cc`."""
    return next((refusal for shape in shapes if (refusal := family_of(shape).refused_on(shape, cc)) is not None), None)


def unrecorded_on(shapes, cc: int) -> str | None:
    """Why the launches recorded for the first such shape are not the ones a device of compute capability
    `cc` runs; None when they are for every one."""
    return next((why for shape in shapes if (why := family_of(shape).unrecorded_on(shape, cc))), None)


def replayssm_unproven(model_type: str, buffer_len: object) -> str | None:
    """What `--use-replayssm` (at `--replayssm-buffer-len`, None for vLLM's default) makes a model of this type
    launch that the build did not prove, None where it proved it: the rule of the family that reads the type
    first, then the others' (ReplaySSM replaces the Mamba-2 decode whatever the model)."""
    ordered = sorted(FAMILIES, key=lambda family: model_type not in family.model_types)
    return next((why for family in ordered if (why := family.replayssm_unproven(model_type, buffer_len))), None)


def describe(shape) -> str:
    """What sizes a shape's kernels, for a miss."""
    return family_of(shape).describe(shape)


def proven() -> str:
    """What the proof covers, as the preflight names it beside a model it does not."""
    return _listed([family.proves for family in FAMILIES], ", and")


def record(shape, cc: int, limit: int, dtype: str) -> list:
    """The launches of a shape its family records (a mixer or latent attention), vLLM's ops on CPU tensors."""
    family = family_of(shape)
    if family.record is None:
        raise TypeError(f"{shape.label}: the {family.description} family records no launches of its own")
    return family.record(shape, cc, limit, dtype)
