"""The bytes the derived layers add over the base, measured on the built image as `bench/build` reports
them (the layers above the base's history, as `docker history` sizes them).

Issue 63 sets the budget at 1.5 MiB (BUDGET), with room for the fp16 patch and the door. The image does not
meet it yet: 2,406,969 B on the image of main 1c12c05, 2,382,292 B once the fit check's passes and the
clamp's ranking stayed out (the bytecode 1,016,679 B, patches/ 405,656 B, entrypoint/ 374,036 B, the
clamp's patched vLLM files and reports 276,276 B, the proof's outputs 112,494 B, door/ 67,903 B, the image
facts 53,538 B, contract/ 38,914 B, imagefacts/ 28,072 B, the user 8,084 B). Our modules' sources and
bytecode are 1.84 MB of it: only shipping them compressed (zipimport: 731 kB) or without one of the two
reaches the budget, a change of what a traceback and `__file__` show. Until then CEILING holds the layers
where they are, so they cannot grow unseen; what the repository ships is held in the unit tier
(tests/unit/test_derived_layers.py)."""
BUDGET = 3 * 2**19  # 1.5 MiB
CEILING = 2_400_000


def derived_bytes(client, image: str, base: str) -> int:
    base_layers = len(client.images.get(base).history())
    return sum(layer["Size"] for layer in client.images.get(image).history()[:-base_layers])


def test_the_derived_layers_stay_under_the_ceiling(docker_client, image, image_base):
    added = derived_bytes(docker_client, image, image_base)
    assert added <= CEILING, (f"the derived layers add {added:,} B ({added / 2**20:.2f} MiB) over {image_base}, "
                              f"above the ceiling {CEILING:,} B (the budget is {BUDGET:,} B)")
