"""Gemma 4: the built-in classes' attention layers at tensor parallel 1, 2 and 4 (attention.BUILTIN_CONFIGS);
a Gemma 4 config.json is read by the attention reader like any attention model's."""
from patches.fitcheck import attention
from patches.fitcheck.base import Family


def _matrix(dtype: str) -> list:
    return [shape for models in (attention.BUILTIN_MODELS, attention.BUILTIN_TP_MODELS) for shapes in models.values()
            for shape in shapes]


FAMILY = Family(name="gemma4", role="attention", description="Gemma 4 attention layer", shape_type=attention.LayerShape,
                describe=attention.describe, matrix=_matrix, order=20)
