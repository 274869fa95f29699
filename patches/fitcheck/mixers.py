"""The mixers and latent attention under the one name callers outside the package use (bench/, tooling/,
the tests): each family's shape, reader and built-in models (families/), and, looping over the registry, a
model's mixer and the devices' rules. Nothing in the package imports this module."""
from __future__ import annotations

from patches.fitcheck import families
from patches.fitcheck.base import Refusal  # noqa: F401
from patches.fitcheck.families import (config_refused_on, is_mixer, latent_attention, mixer_from_config,  # noqa: F401
                                       refused_on, unrecorded_on)
from patches.fitcheck.families.gated_delta_net import (BUILTIN_GDN, GDN_DEFAULTS, GDN_FIELDS,  # noqa: F401
                                                       GDN_RECORDED_BELOW_CC, GDN_TEXT_TYPES, GDN_TYPES, STATE_DTYPES,
                                                       GdnShape, gdn_shape)
from patches.fitcheck.families.kda import (BUILTIN_KDA, KDA_DEFAULTS, KDA_FIELDS, KDA_SUBFIELDS, KDA_TYPES,  # noqa: F401
                                           KdaShape, kda_shape)
from patches.fitcheck.families.mamba1 import (BUILTIN_MAMBA1, MAMBA1_FIELDS, MAMBA1_TYPES, Mamba1Shape,  # noqa: F401
                                              mamba1_shape)
from patches.fitcheck.families.mamba2 import (BUILTIN_HYBRIDS, BUILTIN_STATE_SPACE_MAMBA2, MAMBA2_HYBRID_TYPES,  # noqa: F401
                                              MIXER_FIELDS, MixerShape, mamba2_shape)
from patches.fitcheck.families.mla import (BUILTIN_MLA, MLA_DEFAULT_ROPE_DIM, MLA_FIELDS, MLA_MIN_CC,  # noqa: F401
                                           MLA_RECORDED_BELOW_CC, MlaShape, mla_shape)
from patches.fitcheck.families.short_conv import (BUILTIN_SHORT_CONV, SHORT_CONV_DEFAULT_WIDTH,  # noqa: F401
                                                  SHORT_CONV_FIELDS, SHORT_CONV_TYPES, ShortConvShape, short_conv_shape)
from patches.fitcheck.families.sparse import SPARSE_MIN_CC  # noqa: F401
from patches.fitcheck.mixer_shapes import *  # noqa: F401,F403
from patches.fitcheck.mixer_shapes import fields_by_kind
from patches.fitcheck.table import mixer_fields  # noqa: F401

FIELDS_BY_MIXER = fields_by_kind()
BUILTIN_MIXER_MODELS = families.builtin_models()
BUILTIN_STATE_SPACE = {**BUILTIN_MAMBA1, **BUILTIN_STATE_SPACE_MAMBA2}  # the matrix's Mamba-1 and pure Mamba-2 models


def gdn_from_config(config, model: str, where: str, tensor_parallel: int = 1) -> GdnShape | None:
    """The gated delta net of a model's config, None for a model of another type."""
    config = families.typed(config, where)
    if GDN_TEXT_TYPES.get(config.type_of_text, config.type_of_text) not in GDN_TYPES:
        return None
    return gdn_shape(config.text, config.type_of_text, model, where, tensor_parallel)
