"""door/data.py: JSON and YAML with a size cap and a depth limit, refused in one line naming the input."""
import json

import pytest
from hypothesis import given, strategies as st

from door.data import json_depth, load_json, load_yaml
from door.problem import Problem

# JSON values whose strings hold the characters a bracket count could be fooled by
TEXT = st.text(alphabet=st.sampled_from('[]{}"\\ a\u00e9\n'), max_size=6)
VALUES = st.recursive(st.none() | st.booleans() | st.integers() | TEXT,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=25)


def depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


@given(VALUES)
def test_the_depth_scan_counts_as_the_parser_nests_whatever_the_strings_hold(value):
    data = json.dumps(value).encode()
    assert json_depth(data, 1000) == depth(value)
    limit = depth(value)
    assert load_json(data, "x.json", 2**20, max_depth=max(limit, 1)) == value
    if limit > 1:
        with pytest.raises(Problem, match=r"^x\.json nests more than"):
            load_json(data, "x.json", 2**20, max_depth=limit - 1)


@pytest.mark.parametrize("data, said", [
    (b"[" * 200_000 + b"]" * 200_000, "db.json nests more than 64 levels deep"),
    (b'{"a":' * 200_000, "db.json nests more than 64 levels deep"),
    (b"\xef\xbb\xbf{}", "db.json is not valid JSON"),  # a BOM: strict UTF-8 JSON has none
    (b'{"a": "\xff"}', "db.json is not UTF-8 text"),
    (b'{"a": 1, "a": 2}', "db.json gives the key 'a' twice"),
    (b"x" * (2**20 + 1), "db.json is 1048577 bytes, more than the 1 MiB"),
], ids=["200000-deep-arrays", "200000-deep-objects", "bom", "not-utf8", "key-twice", "over-cap"])
def test_bad_json_is_one_line_naming_the_input(data, said):
    with pytest.raises(Problem) as refused:
        load_json(data, "db.json", 2**20)
    assert str(refused.value).startswith(said) and "\n" not in str(refused.value)


def test_yaml_is_read_safely_within_its_limits():
    assert load_yaml(b"a: [1, {b: two}]\n", "u.yaml", 1024) == {"a": [1, {"b": "two"}]}
    for data, said in [(b"- " * 100 + b"x", "u.yaml nests more than 64 levels deep"),
                       (b"[" * 100_000, "u.yaml nests more than 64 levels deep"),
                       (b"a: !!python/object:os.system x", "u.yaml is not valid YAML"),
                       (b"a: [", "u.yaml is not valid YAML"),
                       (b"\xff: 1", "u.yaml is not UTF-8 text")]:
        with pytest.raises(Problem) as refused:
            load_yaml(data, "u.yaml", 2**20)
        assert str(refused.value).startswith(said) and "\n" not in str(refused.value), data
