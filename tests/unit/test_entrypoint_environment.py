"""The server's environment: the entrypoint's own settings stay behind, the clamp's old names reach
the server under their new names for one release, with a warning in the report."""
from contract.layout import DEPRECATED_ENV_NAMES, ENV_FIT_TABLE, ENV_SMEM_LIMIT
from contract.verdict import Status
from entrypoint.environment import check_env, server_env
from entrypoint.settings import ENTRYPOINT_ONLY, SHARED_WITH_SERVER, parse_settings

from tests.support.seed_configs import RTX_3090_12B_ENV, T4_E2B_ENV


class ReadRecordingStandinEnv(dict):
    """An environment that records every name read from it."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read = set()

    def get(self, name, default=None):
        self.read.add(name)
        return super().get(name, default)


def test_entrypoint_only_names_are_exactly_what_the_settings_read_and_the_server_does_not():
    env = ReadRecordingStandinEnv(RTX_3090_12B_ENV)
    parse_settings(env)
    assert env.read - set(SHARED_WITH_SERVER) == set(ENTRYPOINT_ONLY)


def test_server_env_drops_the_entrypoints_settings_and_keeps_the_rest():
    env = {**T4_E2B_ENV, "VLLM_EXTRA_ARGS": "--seed 1", "SKIP_CHECKS": "port",
           "HF_HOME": "/cache/hf", "PATH": "/usr/bin", "VLLM_LOGGING_LEVEL": "DEBUG"}
    out = server_env(env)
    assert not set(ENTRYPOINT_ONLY) & set(out)
    assert out == {"HF_HOME": "/cache/hf", "PATH": "/usr/bin", "VLLM_LOGGING_LEVEL": "DEBUG",
                   **{name: env[name] for name in SHARED_WITH_SERVER if name in env}}
    assert check_env(env).status is Status.PASS


def test_each_deprecated_name_reaches_the_server_under_its_new_name_and_is_reported():
    env = {"PATH": "/usr/bin", **{old: f"value of {old}" for old in DEPRECATED_ENV_NAMES}}
    out = server_env(env)
    assert out == {"PATH": "/usr/bin", **{new: f"value of {old}" for old, new in DEPRECATED_ENV_NAMES.items()}}
    result = check_env(env)
    assert result.status is Status.WARN
    for old, new in DEPRECATED_ENV_NAMES.items():
        assert f"{old} is now {new}" in result.message and f"{old} to {new}" in result.fix


OLD_FIT_TABLE = next(old for old, new in DEPRECATED_ENV_NAMES.items() if new == ENV_FIT_TABLE)


def test_the_new_name_wins_over_the_old_one():
    env = {OLD_FIT_TABLE: "/old.json", ENV_FIT_TABLE: "/new.json", ENV_SMEM_LIMIT: ""}
    assert server_env(env) == {ENV_FIT_TABLE: "/new.json", ENV_SMEM_LIMIT: ""}
    result = check_env(env)
    assert result.status is Status.WARN and f"{OLD_FIT_TABLE} ignored" in result.message


def test_an_empty_deprecated_name_counts_as_unset():
    assert server_env({OLD_FIT_TABLE: " "}) == {} and check_env({OLD_FIT_TABLE: ""}).status is Status.PASS
