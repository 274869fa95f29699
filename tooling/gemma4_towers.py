"""The towers a published Gemma 4 checkpoint carries: the small models an audio and a vision tower,
the large ones a vision tower (head 64 in the small models, 72 in the large); the other tower fields
are transformers' class defaults. One home for the fp16 census (tooling/fp16_census.py) and the
tests' config.json files (tests/support/gemma4_configs.py, `towers=True`)."""

TOWERS = {
    "gemma4-e2b": {"audio": {}, "vision": {}},
    "gemma4-e4b": {"audio": {}, "vision": {}},
    "gemma4-12b": {"vision": dict(hidden_size=1152, num_attention_heads=16, head_dim=72)},
    "gemma4-26b-a4b": {"vision": dict(hidden_size=1152, num_attention_heads=16, head_dim=72)},
    "gemma4-31b": {"vision": dict(hidden_size=1152, num_attention_heads=16, head_dim=72)},
}
