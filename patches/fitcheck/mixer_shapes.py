"""What the shapes a family records itself (mixers, latent attention) share with the launches that record
them (mixer_launches.py, gdn_launches.py, kda_launches.py): the base of their shapes, their kinds' names,
the constants both sides read. Each family's shape, reader and built-in models are its module's
(families/mamba2.py, mamba1.py, short_conv.py, gated_delta_net.py, kda.py, mla.py). Pure standard library.
"""
from __future__ import annotations

from contract.model_config import Section
from patches.fitcheck.base import DEFAULT_DTYPE

# The history length the build records ReplaySSM's Mamba-2 decode at (`--use-replayssm`): vLLM's default
# `--replayssm-buffer-len`. Its kernels' tiles grow with the length (measured on sm_75 / sm_86: at most
# 4,096 / 6,656 bytes at 16, 16,384 / 20,480 at 64), so the preflight names another length as not proven.
REPLAYSSM_HISTORY = 16
MAMBA2 = "mamba2"
MAMBA1 = "mamba1"
SHORT_CONV = "short_conv"
MLA = "mla"
GATED_DELTA_NET = "gated_delta_net"
KDA = "kda"
MODEL_DTYPE = DEFAULT_DTYPE  # the activations' dtype in the recorded launches unless a run says another

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
    kernels (the first `mixer`): its verdicts' key in the fit table (table.py)."""

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


def as_section(text: Section | dict, where: str) -> Section:
    """A text section as the readers take it (a caller's dict: its fields read as the section's)."""
    return text.at(where) if isinstance(text, Section) else Section(text, "", where)


# vLLM's kimi_gdn_linear_attn.py: a gate lower bound lies in [-5, 0) (_KDA_GATE_LOGBOUND_MIN)
KDA_GATE_LOWER_BOUND_MIN = -5.0
