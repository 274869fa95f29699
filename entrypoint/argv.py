"""The words the entrypoint appends to the server's argv (VLLM_EXTRA_ARGS, then the container's
arguments), parsed as vLLM's own parser will parse them, and judged before anything starts.

vLLM's FlexibleArgumentParser first rewrites the words (underscores to dashes in option names,
`-O3` to `--optimization-level 3`, dotted `--a.b v` to `--a '{"b": v}'`), then hands them to
argparse, which takes unambiguous prefixes (`--dt` is `--dtype`). `parse_extra` does the same with
the image's option table (imagefacts/shape.py), so every spelling vLLM accepts lands on its dest.
Each value is converted with the type, choices and nargs vLLM's parser gives its option (the
table records them: imagefacts/value_types.py), so `--seed abc` is refused here as vLLM's parser
refuses it. A dest that one of the entrypoint's settings owns is refused naming that setting and the
spelling the user wrote: the setting is the one place for it (the preflight checks most of them), and
the last word would win in vLLM. What the checks re-judge from here (quantization, attention
backends, executor backend, the config overrides and the files the server opens) they read from
`Extras.values`, typed."""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shlex
import unicodedata

from imagefacts.shape import SPELLED, VllmValues, long_option, rebuild_parser
from contract.verdict import Result, passed, warned
from .settings import SPECULATIVE_FIX, SettingsError, speculative_value_problem
from door import files
from door.problem import UsageError

EXTRA_ARGS = "VLLM_EXTRA_ARGS"
CONTAINER_ARGS = "the container's arguments"

# dest -> the setting that owns it (vLLM 0.33.0's dest names; a test holds them to the image's parser).
OWNED = {
    "model": "MODEL", "model_tag": "MODEL", "served_model_name": "SERVED_MODEL_NAME",
    "host": "HOST", "port": "PORT", "uds": "HOST and PORT", "dtype": "DTYPE", "kv_cache_dtype": "KV_CACHE_DTYPE",
    "tensor_parallel_size": "TENSOR_PARALLEL_SIZE", "pipeline_parallel_size": "PIPELINE_PARALLEL_SIZE",
    "max_model_len": "MAX_MODEL_LEN", "max_num_seqs": "MAX_NUM_SEQS",
    "gpu_memory_utilization": "GPU_MEMORY_UTILIZATION", "enforce_eager": "ENFORCE_EAGER",
    "reasoning_parser": "REASONING_PARSER",
    "tool_call_parser": "TOOL_CALL_PARSER", "enable_auto_tool_choice": "TOOL_CALL_PARSER",
    "api_key": "API_KEY_FILE",
}
# --speculative-config is judged like SPECULATIVE_CONFIG (its drafter by the drafter, memory and disk
# checks: speculative_problem, preflight.resolve_models); given together with the setting it is refused.
SPECULATIVE_SETTING = "SPECULATIVE_CONFIG or DRAFTER"
# Owned dests no check reads: the setting is their one place, not a checked value.
NOT_CHECKED = ("served_model_name", "enforce_eager", "max_num_seqs", "gpu_memory_utilization")
# dest -> why it cannot be given at all, and what to do instead.
REFUSED = {
    "config": ("a config file sets options the preflight never sees",
               "put its options in the env file's settings and VLLM_EXTRA_ARGS"),
    "hf_token": ("a token in argv shows in /proc/1/cmdline, `docker inspect` and the logs",
                 "pass HF_TOKEN in the environment from a secret"),
    "help": ("the server would print its help and exit", "run `docker run --rm --entrypoint vllm IMAGE serve --help`"),
    "data_parallel_size": ("data parallel servers are not checked by the preflight",
                           "run one server per GPU group (docs/fleet.md) or set TENSOR_PARALLEL_SIZE"),
}
# Inside a JSON option: keys that one of the settings owns.
OWNED_KEYS = {("structured_outputs_config", "reasoning_parser"): "REASONING_PARSER"}
OPTION_NAME = re.compile(r"(?<=--)[^.]*")
# Characters an editor, chat app or web page puts where `-` or `--` was typed ("smart" dashes), each
# looking like the ASCII hyphen-minus: argparse takes a word starting with one for a positional value
# (the model), not an option. vLLM 0.33.0's parser reads no `@file` of arguments either (no
# fromfile_prefix_chars in utils/argparse_utils.py): `@serve.args` is a positional value too.
DASH_LOOKALIKES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
ARGS_FILE_PREFIX = "@"


def meant_option(word: str, table: dict) -> str:
    """The option a word written with look-alike dashes stands for: the table's spelling of its name
    (`-tp` or `--max-model-len`), with its `=value` kept."""
    name, equals, value = word.lstrip("-" + DASH_LOOKALIKES).partition("=")
    name = name.replace("_", "-")
    strings = {option for entry in table["options"] for option in entry["options"]}
    option = next((f"{dashes}{name}" for dashes in ("--", "-") if f"{dashes}{name}" in strings), f"--{name}")
    return option + equals + value


def option_dest(option: str, table: dict) -> str | None:
    """The dest an option string (`--max-model-len=5`: its name before `=`) sets, None if none."""
    name = option.partition("=")[0]
    return next((entry["dest"] for entry in table["options"] if name in entry["options"]), None)


def stray_word(word: str, table: dict, where: str) -> SettingsError | None:
    """Why `word` (from `where`), taken by the parser as a positional value (the model) or left unknown,
    is not what the user meant (an option written with look-alike dashes, an @file of arguments),
    naming the word as written and what to write instead; None for any other word."""
    lead = word[: len(word) - len(word.lstrip("-" + DASH_LOOKALIKES))]
    odd = list(dict.fromkeys(char for char in lead if char in DASH_LOOKALIKES))
    if odd:
        names = ", ".join(f"U+{ord(char):04X} {unicodedata.name(char, 'a dash')}" for char in odd)
        meant = meant_option(word, table)
        owner = OWNED.get(option_dest(meant, table) or "")
        fix = (f"Set {owner} instead: the word stands for {meant.partition('=')[0]}, which the entrypoint sets from "
               f"{owner}." if owner else f"Write {meant!r} with ASCII hyphens (an editor or chat app replaced them).")
        return SettingsError(where, word, f"options written with the ASCII hyphen-minus '-': this word starts with {names}, "
                             "which looks like '-' but is not, so vLLM's parser does not read it as an option "
                             "(it would take the word for the model to serve, or refuse it)", fix)
    if word.startswith(ARGS_FILE_PREFIX):
        return SettingsError(where, word, "the options themselves: vLLM's parser reads no @file of arguments and would take "
                             "the word for the model to serve",
                             "Write the options that file holds in place of the word.")
    return None


@dataclasses.dataclass(frozen=True)
class Extras:
    """What the extra words set, by dest (each value converted as vLLM's parser converts it: an int
    for `--seed 1`, a dict for a JSON option, the constant for a flag, a list for nargs '+'/'*'; text
    where the table records no type); `judged` is False when no option table was at hand to parse
    them (then the values are the re-checked options' text)."""
    values: dict
    judged: bool = True
    words: int = 0
    # dest -> where it was given and how it was spelled there: "VLLM_EXTRA_ARGS --tokenizer"
    named: dict = dataclasses.field(default_factory=dict)
    # vLLM's value lists the re-judged options are checked against (image facts); None: not judged
    lists: VllmValues | None = None

    def get(self, dest: str, default=None):
        return self.values.get(dest, default)

    def name(self, dest: str) -> str:
        """How a message names the option of `dest`: where it was given, as it was spelled."""
        return self.named.get(dest) or f"{EXTRA_ARGS} --{dest.replace('_', '-')}"


def flexible_words(words: list[str]) -> list[str]:
    """The words as vLLM's FlexibleArgumentParser.parse_args hands them to argparse (vLLM 0.33.0,
    utils/argparse_utils.py)."""
    processed: list[str] = []
    for index, word in enumerate(words):
        if word.startswith("--"):
            key, equals, value = word.partition("=")
            processed.append(OPTION_NAME.sub(lambda m: m.group(0).replace("_", "-"), key, count=1) + equals + value)
        elif word.startswith("-O") and word != "-O":
            processed += ["--optimization-level", word[3:] if word[2] == "=" else word[2:]]
        elif word == "-O" and index + 1 < len(words) and words[index + 1] in {"0", "1", "2", "3"}:
            processed.append("--optimization-level")
        else:
            processed.append(word)
    out, dotted, skip = [], {}, set()
    for index, word in enumerate(processed):
        if index in skip:
            continue
        if not (word.startswith("-") and "." in word.partition("=")[0]):
            out.append(word)
            continue
        name, equals, value = word.partition("=")
        if not equals:
            if index + 1 >= len(processed):
                raise UsageError(f"argument {name}: expected one argument")
            value = processed[index + 1]
            skip.add(index + 1)
        if name.endswith("+"):
            name, value = name[:-1], json.dumps(value.split(","))
        key, *path = name.split(".")
        try:
            parsed = files.word_json(value)
        except (ValueError, RecursionError):
            parsed = value
        node = dotted.setdefault(key, {})
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else node
        node[path[-1]] = parsed
    for key, value in dotted.items():
        out += [key, json.dumps(value)]
    return out


def parse_words(words: list[str], table: dict, strays: str | None = None) -> tuple[dict, dict]:
    """(dest -> typed value, dest -> the spelling that set it) for each option the words set;
    UsageError for what vLLM's parser would refuse; with `strays` (where the words came from),
    SettingsError for a positional or unknown word meant as something else (stray_word), which
    vLLM's parser takes for the model."""
    try:
        namespace, unknown = rebuild_parser(table).parse_known_args(flexible_words(words))
    except argparse.ArgumentError as error:
        raise UsageError(" ".join(str(error).split())) from None
    values = vars(namespace)
    positional = [values.get(entry["dest"]) for entry in table["positionals"]]
    for word in [w for value in positional for w in (value if isinstance(value, list) else [value])] + unknown:
        stray = stray_word(word, table, strays) if strays and isinstance(word, str) else None
        if stray is not None:
            raise stray
    if unknown:
        raise UsageError(f"unrecognized arguments: {' '.join(unknown)}")
    spelled = values.pop(SPELLED, {})
    return values, spelled


def parse_extra(words: list[str], table: dict) -> dict:
    """dest -> typed value for each option the words set; UsageError for what vLLM's parser would refuse."""
    return parse_words(words, table)[0]


def is_json_object(value) -> bool:
    if isinstance(value, str):
        try:
            value = files.word_json(value)
        except (ValueError, RecursionError):
            return False
    return isinstance(value, dict)


def json_object(value) -> dict:
    """A JSON option's value as an object: typed already (the option table's type), or text as given
    where the table records no type; {} for anything else."""
    if isinstance(value, str):
        try:
            value = files.word_json(value)
        except (ValueError, RecursionError):
            return {}
    return value if isinstance(value, dict) else {}


def owner_problem(values: dict, table: dict, where: str, raw: str, spelled: dict | None = None) -> SettingsError | None:
    """The first option the words set that a setting owns or that cannot be given, named as written."""
    for dest in values:
        option = (spelled or {}).get(dest) or (long_option(table, dest) if dest in table_dests(table)
                                               else "a positional model")
        if dest in OWNED:
            why = "" if dest in NOT_CHECKED else ", which the preflight checks"
            return SettingsError(where, raw, f"no {option}: the entrypoint sets it from {OWNED[dest]}{why}",
                                 f"Set {OWNED[dest]} instead and remove {option}.")
        if dest in REFUSED:
            why, fix = REFUSED[dest]
            return SettingsError(where, raw, f"no {option}: {why}", f"Remove {option}; {fix}.")
    for (dest, key), setting in OWNED_KEYS.items():
        if key in json_object(values.get(dest)):
            return SettingsError(where, raw, f"no {key} in {long_option(table, dest)}: the entrypoint sets it from "
                                 f"{setting}", f"Set {setting} instead.")
    return None


def speculative_drafter(extras: Extras) -> str | None:
    """The drafter --speculative-config names in the extra words, if any."""
    model = json_object(extras.get("speculative_config")).get("model")
    return model if isinstance(model, str) and model else None


def speculative_problem(extras: Extras, set_by_settings: bool) -> SettingsError | None:
    """--speculative-config in the extra words, judged as SPECULATIVE_CONFIG is: a JSON object whose
    "model" is printable text; refused beside SPECULATIVE_CONFIG or DRAFTER (one place for it)."""
    value = extras.get("speculative_config")
    if value is None:
        return None
    name = extras.name("speculative_config")
    shown = value if isinstance(value, str) else json.dumps(value)
    if set_by_settings:
        return SettingsError(name, shown, f"no {name.split()[-1]} while {SPECULATIVE_SETTING} is set",
                             f"Set the drafter in one place: {SPECULATIVE_SETTING}, or the option alone.")
    model = json_object(value).get("model", "")
    if not is_json_object(value) or not isinstance(model, str) or not model.isprintable():
        return SettingsError(name, shown, 'a JSON object such as {"model": "/models/drafter", '
                             '"num_speculative_tokens": 4} whose "model" is a path or model id',
                             f"Fix the JSON, or set {SPECULATIVE_SETTING} instead.")
    typed = speculative_value_problem(json_object(value))
    if typed:
        return SettingsError(name, shown, typed, SPECULATIVE_FIX.format(where=name.split()[-1]))
    return None


def table_dests(table: dict) -> set[str]:
    return {entry["dest"] for entry in table["options"]}


# Without an option table (no image facts and no vLLM to ask), the checks still see these options
# when spelled out in full, as the first releases of the entrypoint did.
RECHECKED = {"attention_backend": ("--attention-backend",), "attention_config": ("--attention-config",),
             "quantization": ("--quantization", "-q"),
             "distributed_executor_backend": ("--distributed-executor-backend",)}


def spelled_out(words: list[str]) -> dict:
    """The re-checked options given with their full names (the last one wins)."""
    try:
        words = flexible_words(words)
    except UsageError:
        pass
    found = {}
    for index, word in enumerate(words):
        for dest, flags in RECHECKED.items():
            for flag in flags:
                if word == flag and index + 1 < len(words):
                    found[dest] = words[index + 1]
                elif word.startswith(flag + "="):
                    found[dest] = word[len(flag) + 1:]
    return found


def judge_extra(extra_args: tuple[str, ...], container_args: tuple[str, ...], table: dict | None,
                lists: VllmValues | None = None) -> Extras:
    """Both word lists judged against `table` (None: not judged, only the re-checked options spelled
    out are seen), their values later against vLLM's `lists`. Raises SettingsError naming where the
    word came from and the setting to use instead."""
    if table is None:
        return Extras(spelled_out(list(extra_args) + list(container_args)), judged=False,
                      words=len(extra_args) + len(container_args), lists=lists)
    values: dict = {}
    named: dict = {}
    for where, words in ((EXTRA_ARGS, extra_args), (CONTAINER_ARGS, container_args)):
        if not words:
            continue
        raw = shlex.join(words)
        try:
            parsed, spelled = parse_words(list(words), table, strays=where)
        except SettingsError:
            raise
        except UsageError as error:
            raise SettingsError(where, raw, f"options of this vLLM's server ({error})",
                                "Fix or remove that word; `vllm serve --help=all` lists the options.") from None
        problem = owner_problem(parsed, table, where, raw, spelled)
        if problem:
            raise problem
        values.update(parsed)
        named.update({dest: f"{where} {spelled.get(dest) or long_option(table, dest)}" for dest in parsed})
    return Extras(values, words=len(extra_args) + len(container_args), named=named, lists=lists)


NAME = "argv"


def argv_result(extras: Extras, source: str | None) -> Result:
    """What the report says about the extra words (they were refused before the checks if owned)."""
    if not extras.judged:
        return warned(NAME, f"{extras.words} extra word(s) not judged: no option table of the server's parser "
                            "(no image facts, and vLLM does not import here)",
                      "run the image as built; vLLM itself still refuses unknown options at start")
    given = ", ".join(sorted(extras.values)) or "nothing"
    return passed(NAME, f"{extras.words} extra word(s) parsed with {source}: they set {given}; "
                        "none is owned by a setting")
