"""The serving tier's compose override takes away only what a CPU machine cannot have."""
import yaml

from tooling import serving_stack

SHIPPED = yaml.safe_load(serving_stack.COMPOSE_FILE.read_text())["services"][serving_stack.SERVICE]


class TaggedLoader(yaml.SafeLoader):
    pass


for tag in ("!reset", "!override"):
    TaggedLoader.add_constructor(tag, lambda loader, node, tag=tag: (
        tag, loader.construct_sequence(node, deep=True) if isinstance(node, yaml.SequenceNode)
        else loader.construct_mapping(node, deep=True)))


def override() -> dict:
    text = serving_stack.override_text({"services": {serving_stack.SERVICE: SHIPPED}}, serving_stack.CPU_SETTINGS)
    return yaml.load(text, Loader=TaggedLoader)["services"][serving_stack.SERVICE]


def test_override_touches_only_devices_driver_libraries_memlock_and_settings():
    assert set(override()) == {"devices", "volumes", "ulimits", "environment"}


def test_device_nodes_and_memlock_are_reset():
    assert SHIPPED["devices"] and "memlock" in SHIPPED["ulimits"]
    assert override()["devices"] == ("!reset", [])
    assert override()["ulimits"][1] == {k: v for k, v in SHIPPED["ulimits"].items() if k != "memlock"}


def test_only_the_driver_library_mounts_leave_the_volumes():
    tag, kept = override()["volumes"]
    removed = [v for v in SHIPPED["volumes"] if v not in kept]
    assert tag == "!override" and removed
    assert all(v["target"].startswith("/usr/local/nvidia/lib64/") for v in removed)
    assert [v for v in SHIPPED["volumes"] if v in kept] == kept


def test_settings_skip_only_the_checks_that_need_a_gpu():
    from entrypoint.settings import CHECK_NAMES

    skipped = serving_stack.CPU_SETTINGS["SKIP_CHECKS"].split(",")
    assert set(skipped) <= set(CHECK_NAMES)
    assert {"model", "drafter", "disk", "memory", "port"}.isdisjoint(skipped)


def test_env_file_reader_takes_the_shipped_defaults():
    env = serving_stack.read_env_file()
    assert env["MODEL"].startswith("/models/") and env["HF_HUB_OFFLINE"] == "1"
    assert all(not key.startswith("#") for key in env)


def test_the_parsers_of_the_served_stack_are_the_shipped_env_files():
    # The serving tier's smoke contract (tools, reasoning) must prove the env file's defaults, so
    # the test settings leave the parsers to it.
    env = serving_stack.read_env_file()
    assert env["TOOL_CALL_PARSER"] == "gemma4" and env["REASONING_PARSER"] == "gemma4"
    assert not {"TOOL_CALL_PARSER", "REASONING_PARSER"} & set(serving_stack.CPU_SETTINGS)


def test_a_case_can_take_one_shipped_volume_away_to_mount_something_else_there():
    cache_root = SHIPPED["environment"]["VLLM_CACHE_ROOT"]
    text = serving_stack.override_text({"services": {serving_stack.SERVICE: SHIPPED}}, serving_stack.CPU_SETTINGS,
                                       unmounted=(cache_root,))
    _, kept = yaml.load(text, Loader=TaggedLoader)["services"][serving_stack.SERVICE]["volumes"]
    assert [serving_stack.mount_target(v) for v in override()["volumes"][1] if v not in kept] == [cache_root]
