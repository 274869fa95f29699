"""Generated cases (Hypothesis) at the entrypoint's boundaries: every environment setting, and word
lists for VLLM_EXTRA_ARGS made of the option table's options with generated values, arbitrary words
and planted secrets. Each ends as a typed value or one refusal line naming the setting or the
option's source; never a traceback; a planted secret never appears in what is printed."""
import shlex
import string

from hypothesis import example, given, strategies as st

from door import redact as redaction
from entrypoint.argv import judge_extra
from entrypoint.argv_files import opened_files_problem
from entrypoint.start import refusal_line
from entrypoint.server_command import server_argv
from entrypoint.settings import ENTRYPOINT_ONLY, SHARED_WITH_SERVER, SettingsError, parse_settings
from imagefacts.value_types import converter
from tests.support.entrypoint_cli import run_entrypoint
from tests.support.option_tables import option_words, vllm_like_table

TABLE = vllm_like_table()
SETTINGS = sorted(set(ENTRYPOINT_ONLY) | set(SHARED_WITH_SERVER))
SECRET = "sk-planted-generated-5e0b"
BASE = {"MODEL": "/models/m"}


def test_the_search_for_the_planted_secret_finds_it_where_it_is_shown():
    shown = refusal_line(f"VLLM_EXTRA_ARGS='--response-role {SECRET}': expected something")
    assert SECRET in shown  # the search below can see the secret where a message shows it
    assert SECRET not in refusal_line(f"VLLM_EXTRA_ARGS='--api-key {SECRET}': expected something")


@given(st.sampled_from(SETTINGS), st.text(st.characters(blacklist_characters="\x00"), max_size=40))
@example("TURING_CLAMP_SMEM_LIMIT", "64k")
@example("PORT", "٨٠٠٠")
@example("VLLM_EXTRA_ARGS", f"--api-key {SECRET} '")
@example("SPECULATIVE_CONFIG", '{"model": "/d", "api_key": "' + SECRET + '"')
def test_every_setting_is_typed_or_refused_in_one_line_naming_it(name, raw):
    try:
        parsed = parse_settings({**BASE, name: raw})
    except SettingsError as error:
        line = refusal_line(f"bad setting {error}")
        assert "\n" not in line and error.variable == name and f"bad setting {name}=" in line, line
        assert len(line) < 1500, line
        assert SECRET not in line
        return
    assert isinstance(parsed.model, str) and parsed.model.isprintable() and parsed.model.strip()
    assert isinstance(parsed.port, int) and isinstance(parsed.extra_args, tuple) and isinstance(parsed.enforce_eager, bool)
    assert all(value is None or isinstance(value, int) for value in (
        parsed.max_model_len, parsed.max_num_seqs, parsed.clamp_smem_limit, parsed.clamp_cc))


def value_for(entry: dict) -> st.SearchStrategy:
    if entry.get("choices"):
        return st.sampled_from(entry["choices"]) | st.text(max_size=8)
    if entry.get("type") in ("int", "human_readable_int"):
        return st.integers(-5, 10**6).map(str) | st.sampled_from(["8k", "1.5K", "2M", "abc", "²", ""])
    if str(entry.get("type")).split(":")[-1] in ("union_dict_and_str", "dataclass", "json"):
        return st.sampled_from(['{"max_position_embeddings": 1024}', "{}", "3", "{bad", f'{{"token": "{SECRET}"}}',
                                "[" * 3000, '{"a": ' + "[" * 3000 + "}"])
    return st.text(string.ascii_letters + string.digits + "/._-{} ", max_size=12)


OPTIONS = [entry for entry in TABLE["options"] if entry["dest"] != "help"]


SECRET_WORDS = st.sampled_from([["--api-key", SECRET], [f"--api_key={SECRET}"], ["--hf-token", SECRET],
                                [f"--my-token={SECRET}"], ["--x-secret", SECRET], ["--db-password", SECRET],
                                ["--download-dir", f"https://user:{SECRET}@host/path"], [f"--api-key={SECRET}", "-x"]])
WORDS = st.lists(option_words(TABLE, value_for) | SECRET_WORDS | st.lists(st.text(max_size=10), max_size=2), max_size=5).map(
    lambda groups: [word for group in groups for word in group])


def typed_as_recorded(values: dict) -> bool:
    for entry in OPTIONS:
        value = values.get(entry["dest"], None)
        if value is None or entry["nargs"] == 0 or converter(entry.get("type")) is None:
            continue
        items = value if isinstance(value, list) else [value]
        kind = {"int": int, "human_readable_int": int, "dataclass": dict, "float": float}.get(entry["type"])
        if kind is not None and not all(isinstance(item, kind) for item in items):
            return False
    return True


@given(WORDS)
@example(["--seed", "abc"])
@example(["--api-key", SECRET, "--seed", "x"])
@example([f"--my-token={SECRET}"])
@example(["--download-dir", f"https://user:{SECRET}@host/path", "--nope"])
@example(["--chat-template", f"/{SECRET}"])
@example([f"--api-key={SECRET}", "-x", "--api-key", SECRET])  # found: "-x" took "--api-key" as its value
def test_generated_extra_words_are_typed_or_refused_in_one_line_without_the_secret(words):
    raw = shlex.join(words)
    chosen = parse_settings({**BASE, "VLLM_EXTRA_ARGS": raw}) if raw.isprintable() else None
    if chosen is None:
        return
    try:
        extras = judge_extra(chosen.extra_args, (), TABLE)
        problem = opened_files_problem(extras)
        if problem:
            raise problem
    except SettingsError as error:
        line = refusal_line(f"bad setting {error}")
        assert "\n" not in line and line.startswith("vllm-turing: bad setting VLLM_EXTRA_ARGS"), line
        assert len(line) < 1500, line
        assert SECRET not in line or f"/{SECRET}" in raw and "--chat-template" in raw  # a path is no secret
        return
    assert typed_as_recorded(extras.values), extras.values
    printed = shlex.join(redaction.redact_words(server_argv(chosen, None)))
    assert SECRET not in printed or "--chat-template" in raw or "--tokenizer" in raw, printed


def test_print_command_masks_a_secret_option_in_the_words_it_cannot_judge(tmp_path):
    """On this host no option table is at hand (no image facts, no vLLM): the words are not judged,
    and the printed command still shows no key."""
    done = run_entrypoint({"MODEL": str(tmp_path), "VLLM_EXTRA_ARGS": f"--api-key {SECRET} --response-role {SECRET}x"},
                          "print-command")
    assert done.returncode == 0, done.stderr
    assert f"--response-role {SECRET}x" in done.stdout  # the search sees an ordinary value
    assert f"--api-key {SECRET}" not in done.stdout and "--api-key '***'" in done.stdout, done.stdout


def test_a_refused_setting_never_echoes_the_key(tmp_path):
    done = run_entrypoint({"MODEL": str(tmp_path), "VLLM_EXTRA_ARGS": f"--api-key {SECRET} 'unbalanced"}, "check")
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert "bad setting VLLM_EXTRA_ARGS" in done.stderr and SECRET not in done.stderr
