"""The files and folders the extra words point the server at, judged before anything starts: a path
the server would fail to open after the load (or at its first request) is refused now, naming the
option as written and the fix (SettingsError: exit 2). A Hugging Face id (`--tokenizer org/name`)
is not a path: the server resolves it as it resolves MODEL.

What each option's value is, as vLLM 0.33.0 reads it:
- `--chat-template`: a file, or the template itself when it holds `{`, `}` or a newline
  (vllm/entrypoints/chat_utils.py: a value without those that cannot be opened is an error);
- `--tokenizer`, `--generation-config` (besides `auto` and `vllm`): a folder, or a Hub id (a local
  tokenizer folder's tokenizer.json and tokenizer_config.json are parsed: checks/model.py);
- `--tool-parser-plugin`, `--reasoning-parser-plugin`, `--ssl-keyfile`, `--ssl-certfile`,
  `--ssl-ca-certs`, `--mm-encoder-fp8-scale-path`: files;
- `--allowed-local-media-path`: a folder;
- `--hf-overrides`: a JSON object (its keys are applied to config.json before the model, fit,
  length and quantization checks read it: entrypoint/checks/model.py);
- `--hf-config-path`: the config the checks read instead of the model folder's (model.py);
- `--load-format`: one of vLLM's load formats (the image facts' list), which picks the weight files
  the model check reads (model.py LOAD_PATTERNS; `gguf` and `bitsandbytes` are gone from 0.33.0);
- `--config-format`: one of vLLM's config formats (the facts': auto, hf or mistral in 0.33.0;
  mistral needs params.json in the folder: model.py);
- `--lora-modules`: each word `name=path` or a JSON object with "name" and "path"
  (entrypoints/common/cli_args.py LoRAParserAction); a local path is a folder whose
  adapter_config.json the server reads at start, after the model's load (lora/peft_helper.py), any
  other path a Hub id (lora/utils.py get_adapter_absolute_path)."""
from __future__ import annotations

import dataclasses
import os

from door import files
from door.problem import Problem
from .argv import Extras, is_json_object
from .checks.model import tokenizer_problem
from .settings import SettingsError

JINJA_CHARS = "{}\n"
FILE_DESTS = ("tool_parser_plugin", "reasoning_parser_plugin", "ssl_keyfile", "ssl_certfile", "ssl_ca_certs",
              "mm_encoder_fp8_scale_path")
FOLDER_DESTS = ("tokenizer", "generation_config", "allowed_local_media_path")
# values of --generation-config that name no folder
GENERATION_WORDS = ("auto", "vllm")
# folder options whose value may be a Hub id instead (a value that is not a local path)
HUB_DESTS = ("tokenizer", "generation_config")


def local_path(value: str) -> bool:
    """Whether the server reads `value` as a path on this filesystem rather than a Hub id."""
    return os.path.isabs(value) or value.startswith(("./", "../", "~")) or value in (".", "..")


def file_problem(path: str) -> str | None:
    """Why the server could not open `path` as a file (this uid, without blocking), or None."""
    try:
        with files.opened(os.path.expanduser(path), files.shown(path)):
            return None
    except Problem as problem:
        return str(problem)


def folder_problem(path: str) -> str | None:
    """Why the server could not list `path` as a folder (this uid), or None."""
    try:
        os.listdir(os.path.expanduser(path))
        return None
    except PermissionError:
        return f"{files.shown(path)} cannot be read by uid {os.geteuid()} (permission denied)"
    except FileNotFoundError:
        return f"{files.shown(path)} does not exist"
    except NotADirectoryError:
        return f"{files.shown(path)} is not a folder"
    except (OSError, ValueError) as error:
        return f"{files.shown(path)} cannot be read ({getattr(error, 'strerror', None) or error})"


def _problem(dest: str, value: str) -> str | None:
    if dest == "chat_template":
        return None if any(char in value for char in JINJA_CHARS) else file_problem(value)
    if dest in FILE_DESTS:
        return file_problem(value)
    if dest == "generation_config" and value in GENERATION_WORDS:
        return None
    if dest in HUB_DESTS and not local_path(value):
        return None
    problem = folder_problem(value)
    if problem is None and dest == "tokenizer":
        torn = tokenizer_problem(os.path.expanduser(value))
        return f"{torn[0]}: the server's tokenizer would fail to load" if torn else None
    return problem


def format_problem(extras: Extras) -> SettingsError | None:
    """A --load-format or --config-format this vLLM has no loader or parser for (its parser takes
    any text for these; the known values are the image facts')."""
    if extras.lists is None:
        return None
    for dest, known in (("load_format", extras.lists.load_formats), ("config_format", extras.lists.config_formats)):
        value = extras.get(dest)
        if isinstance(value, str) and value not in known:
            return SettingsError(extras.name(dest), value, f"one of this vLLM's formats: {', '.join(known)}",
                                 f"Fix the name, or remove {extras.name(dest).split()[-1]} (auto is the default).")
    return None


@dataclasses.dataclass(frozen=True)
class LoraModule:
    name: str
    path: str
    base_model_name: str | None = None


LORA_FIELDS = ("name", "path", "base_model_name", "is_3d_lora_weight")
ADAPTER_CONFIG = "adapter_config.json"


def lora_module(word: str) -> LoraModule:
    """One --lora-modules word as vLLM's LoRAParserAction reads it; ValueError saying what is wrong."""
    if "=" in word and "," not in word:
        name, path = word.split("=", 1)
        return LoraModule(name, path)
    try:
        found = files.word_json(word)
    except (ValueError, RecursionError):
        raise ValueError("neither name=path nor a JSON object") from None
    if not isinstance(found, dict):
        raise ValueError(f"{files.json_kind(found)}, not a JSON object")
    unknown = sorted(set(found) - set(LORA_FIELDS))
    if unknown or not {"name", "path"} <= set(found):
        raise ValueError(f"{', '.join(unknown)} not among {', '.join(LORA_FIELDS)}" if unknown else
                         'the object needs "name" and "path"')
    if not all(isinstance(found[key], str) and found[key] for key in ("name", "path")):
        raise ValueError('"name" and "path" must be text')
    base = found.get("base_model_name")
    return LoraModule(found["name"], found["path"], base if isinstance(base, str) else None)


def lora_problem(extras: Extras) -> SettingsError | None:
    """The first --lora-modules word vLLM's parser refuses, or whose local folder the server could
    not read its adapter_config.json from."""
    for word in extras.get("lora_modules") or ():
        if not isinstance(word, str) or not word:
            continue
        try:
            module = lora_module(word)
        except ValueError as error:
            return SettingsError(extras.name("lora_modules"), word, f'name=path or {{"name": ..., "path": ...}} ({error})',
                                 "Fix that word, or remove it.")
        if local_path(module.path):
            problem = folder_problem(module.path) or file_problem(os.path.join(module.path, ADAPTER_CONFIG))
            if problem:
                return SettingsError(extras.name("lora_modules"), word, f"a readable LoRA adapter folder with its "
                                     f"{ADAPTER_CONFIG} ({problem})", "Mount the adapter into the container (the path "
                                     f"is read inside it), make it readable by uid {os.geteuid()}, or remove it.")
    return None


def opened_files_problem(extras: Extras) -> SettingsError | None:
    """The first path among the extra words the server could not open, a load or config format it
    does not know, or an --hf-overrides that is not a JSON object; None when every one is usable."""
    problem = format_problem(extras) or lora_problem(extras)
    if problem:
        return problem
    overrides = extras.get("hf_overrides")
    if overrides is not None and not is_json_object(overrides):
        return SettingsError(extras.name("hf_overrides"), str(overrides), 'a JSON object of config.json keys, such as '
                             '{"max_position_embeddings": 8192}', "Fix the JSON, or remove the option.")
    for dest in ("chat_template", *FILE_DESTS, *FOLDER_DESTS):
        value = extras.get(dest)
        if not isinstance(value, str) or not value:
            continue
        problem = _problem(dest, value)
        if problem:
            expected = ("a readable template file, or the template itself" if dest == "chat_template" else
                        "a readable file" if dest in FILE_DESTS else
                        "a readable folder" + (" or a Hugging Face id" if dest in HUB_DESTS else ""))
            return SettingsError(extras.name(dest), value, f"{expected} ({problem})",
                                 "Mount it into the container (the path is read inside it), make it readable by "
                                 f"uid {os.geteuid()}, or remove the option.")
    return None
