"""The bytes the derived layers add over the base, measured on the built image as `bench/build` reports
them (the layers above the base's history, as `docker history` sizes them).

Issue 63 sets the budget at 1.5 MiB (BUDGET), with room for the fp16 patch and the door: 2,406,969 B on the
image of main 1c12c05, 2,382,292 B once the fit check's passes and the clamp's ranking stayed out, and
1,262,233 B once our modules ship as one zip of their sources and bytecode (contract.layout.CODE_ZIP, 726,933 B,
in place of 1,016,679 B of bytecode and 914,581 B of loose files, the clamp's ranked configurations among them);
the rest is the clamp's patched vLLM files and reports (276,276 B), the proof's outputs (107,848 B), the ranked
configurations (88,914 B), the image facts (53,538 B), the user (8,084 B) and sitecustomize.py (640 B). What the repository ships is held in
the unit tier (tests/unit/test_derived_layers.py, tests/unit/test_code_zip.py)."""
BUDGET = 3 * 2**19  # 1.5 MiB


def derived_bytes(client, image: str, base: str) -> int:
    base_layers = len(client.images.get(base).history())
    return sum(layer["Size"] for layer in client.images.get(image).history()[:-base_layers])


def test_the_derived_layers_stay_within_the_budget(docker_client, image, image_base):
    added = derived_bytes(docker_client, image, image_base)
    assert added <= BUDGET, (f"the derived layers add {added:,} B ({added / 2**20:.2f} MiB) over {image_base}, "
                             f"above the budget {BUDGET:,} B (1.5 MiB)")
