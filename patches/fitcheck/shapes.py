"""The fit check's shapes under the one name callers outside the package use (bench/, tooling/, the
tests): the attention layers (attention.py) and, looping over the family registry (families/), a model's
layers and the built-in matrix. Nothing in the package imports this module."""
from __future__ import annotations

from pathlib import Path

from patches.fitcheck.attention import *  # noqa: F401,F403
from patches.fitcheck.attention import read_config
from patches.fitcheck.base import (DEFAULT_DTYPE, DTYPES, TENSOR_PARALLEL_SIZES, ConfigError,  # noqa: F401
                                   UnprovenLayers)
from patches.fitcheck.families import MATRICES, builtin_shapes, has_mixer, model_layers  # noqa: F401
from patches.fitcheck.families import attention_layers as shapes_from_config  # noqa: F401
from patches.fitcheck.families.dense import FAMILY_KV_HEADS, FAMILY_LAYERS, FAMILY_SHAPES  # noqa: F401
from patches.fitcheck.families.encoders import (BUILTIN_TOWER_HEADS, ENCODER_KV_HEADS, ENCODER_LAYERS,  # noqa: F401
                                                ENCODER_SHAPES, TOWER_FIELDS, tower_shapes)
from patches.fitcheck.families.gemma4 import BUILTIN_CONFIGS, BUILTIN_MODELS, BUILTIN_TP_MODELS  # noqa: F401


def load_model_config(path: str | Path, tensor_parallel: int = 1, dtype: str = DEFAULT_DTYPE) -> list:
    """model_layers() of the config.json at `path` (ConfigError: one-line reason)."""
    path = Path(path)
    return model_layers(read_config(path), path.parent.name or path.stem, str(path), tensor_parallel, dtype)
