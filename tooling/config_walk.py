"""How many steps the model config takes from the preflight's fit check into the families.

    python3 -m tooling.config_walk [--trace]

Runs what the preflight's fit check does with a typed model config (entrypoint/checks/clamp.py: run_dtype,
then lookup_fit -> patches.fitcheck.lookup -> the family registry -> a family's reader) for a few configs
and counts, over the fit check's routing code (patches/fitcheck/ outside the family modules, which are the
destination, and outside the fit table's reading, which does not carry the config):
  stays    calls entered into a routing function (comprehensions and generator resumptions not counted)
  returns  those calls' returns that hand a value back (not None)
The table path names no file, so the lookup stops after the layers: what is counted is the config's walk.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from contract.devices import DEVICES
from contract.model_config import parse_config

ROOT = Path(__file__).resolve().parents[1]
FITCHECK = ROOT / "patches" / "fitcheck"
FAMILIES = FITCHECK / "families"
TRACE = "--trace" in sys.argv  # each stay named
NOT_THE_WALK = ("read_table", "installed_versions", "decide")  # the table's side, not the config's

CONFIGS = {
    "gemma4-e4b (Gemma 4)": ("gemma4", "gemma4-e4b"),
    "llama (dense)": None,
    "nemotron-h-8b (hybrid Mamba-2)": ("mamba2", "nemotron-h-8b"),
    "qwen3-next-80b-a3b (gated delta net)": ("gated_delta_net", "qwen3-next-80b-a3b"),
}
LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
         "num_hidden_layers": 32}


def config_of(entry) -> dict:
    if entry is None:
        return LLAMA
    from patches.fitcheck import families

    family, name = entry
    if family == "gemma4":
        from patches.fitcheck.families.gemma4 import BUILTIN_CONFIGS
        return BUILTIN_CONFIGS[name]
    return next(f.builtin[name] for f in families.FAMILIES if f.name == family)


def routing(code) -> bool:
    path = Path(code.co_filename)
    if code.co_name.startswith("<") or FITCHECK not in path.parents:
        return False
    return FAMILIES not in path.parents or path == FAMILIES / "__init__.py"


def walk(config: dict) -> tuple[int, int]:
    from entrypoint.checks import clamp

    typed = parse_config(config, "config.json")
    counts = {"stays": 0, "returns": 0}
    skipping = []

    def profile(frame, event, value):
        code = frame.f_code
        if event == "call" and code.co_name in NOT_THE_WALK and FITCHECK in Path(code.co_filename).parents:
            skipping.append(frame)
        if skipping or not routing(code):
            if event == "return" and skipping and skipping[-1] is frame:
                skipping.pop()
            return
        if event == "call":
            counts["stays"] += 1
            if TRACE:
                print(f"  {Path(code.co_filename).relative_to(ROOT)}:{code.co_name}")
        elif event == "return" and value is not None:
            counts["returns"] += 1

    with tempfile.TemporaryDirectory() as folder:
        table = str(Path(folder) / "no-table.json")
        sys.setprofile(profile)
        try:
            cc, limit = DEVICES["sm75"]
            dtype = clamp.run_dtype(typed, divmod(cc, 10), "auto")
            clamp.lookup_fit(table, typed, "config.json", divmod(cc, 10), limit, 1, dtype)
        finally:
            sys.setprofile(None)
    return counts["stays"], counts["returns"]


def main() -> int:
    for label, entry in CONFIGS.items():
        walk(config_of(entry))  # first: the imports' own calls out of the count
        stays, returns = walk(config_of(entry))
        print(f"{label:40} {stays:3} stays {returns:3} returns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
