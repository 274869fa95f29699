"""Fit tables written as the build writes them, for unit tests of the lookup."""
from contract.model_config import parse_config
from patches.fitcheck import fit_table as table
from patches.fitcheck.families import mixer_from_config

VERSIONS = {"vllm": "0.33.0", "triton": "3.8.0"}


def mixer_table(tmp_path, config: dict, shared: int, cc: int = 75, limit: int = 65536) -> dict:
    """The fit table document of one verdict for the mixer of `config`, as the build writes it."""
    mixer = mixer_from_config(parse_config(config, "c"), "m", "c")
    rows = [{"model": "m", "layer": mixer.layer, "shared": shared, "fits": shared <= limit}]
    path = tmp_path / "fit-table.json"
    table.write_table(path, table.merge(None, [], VERSIONS, [], table.shape_verdicts(rows, [mixer], cc, limit)))
    return table.read_table(path)
