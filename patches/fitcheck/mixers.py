"""The mixers and latent attention under the one name callers outside the package use (bench/, tooling/,
the tests): their shapes and readers (mixer_shapes.py) and, looping over the family registry (families/),
a model's mixer and the devices' rules. Nothing in the package imports this module."""
from __future__ import annotations

from patches.fitcheck import families
from patches.fitcheck.base import Refusal  # noqa: F401
from patches.fitcheck.families import (config_refused_on, is_mixer, latent_attention, mixer_from_config,  # noqa: F401
                                       refused_on, unrecorded_on)
from patches.fitcheck.mixer_shapes import *  # noqa: F401,F403
from patches.fitcheck.mixer_shapes import GDN_TEXT_TYPES, GDN_TYPES, GdnShape, fields_by_kind, gdn_shape
from patches.fitcheck.table import mixer_fields  # noqa: F401

FIELDS_BY_MIXER = fields_by_kind()
BUILTIN_MIXER_MODELS = families.builtin_models()


def gdn_from_config(config, model: str, where: str, tensor_parallel: int = 1) -> GdnShape | None:
    """The gated delta net of a model's config, None for a model of another type."""
    config = families.typed(config, where)
    if GDN_TEXT_TYPES.get(config.type_of_text, config.type_of_text) not in GDN_TYPES:
        return None
    return gdn_shape(config.text, config.type_of_text, model, where, tensor_parallel)
