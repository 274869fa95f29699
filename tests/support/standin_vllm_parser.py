"""A stand-in for the parts of vLLM the entrypoint reads its option table from when the image facts
are missing (imagefacts/read.py read_server_facts): `vllm.utils.argparse_utils.FlexibleArgumentParser`,
`vllm.entrypoints.common.cli_args.make_arg_parser`, the tool and reasoning parser registries, and the
registries its value lists come from (load and config formats, Mamba backends, deprecated
quantization methods: tests/support/vllm_033_facts.py).
Its parser has options of the kinds vLLM 0.33.0's server parser has, with type callables of the
names vLLM uses (optional_type's `_optional_type`, `parse_dataclass`, `union_dict_and_str`, ...), so
the option table recorded from it holds the same type names. `write_standin_vllm_parser(root)` puts
the package in `root` for a subprocess's PYTHONPATH (tests/support/entrypoint_cli.py)."""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from imagefacts.value_types import human_readable_int, union_dict_and_str

TOOL_PARSERS = ["hermes", "gemma4"]
REASONING_PARSERS = ["deepseek_r1", "gemma4"]


def standin_optional_type(return_type):
    """vLLM's optional_type: the table reads `return_type` from the closure."""
    def _optional_type(value: str):
        return None if value in ("", "None") else return_type(value)
    return _optional_type


@dataclasses.dataclass
class StandinCompilationConfig:
    """Some of vLLM's CompilationConfig fields; like every vLLM 0.33.0 config, it forbids other keys."""
    __pydantic_config__ = {"extra": "forbid"}
    cache_dir: str = ""
    mode: int | None = None
    cudagraph_mode: str | None = None
    compile_sizes: list | None = None


@dataclasses.dataclass
class StandinKVTransferConfig:
    """A config that takes other keys (no `extra: forbid`): the table records no fields for it."""
    kv_connector: str | None = None


def dataclass_parser(dataclass_cls):
    def parse_dataclass(value: str, cls=dataclass_cls):
        """vLLM's pydantic config parse, as far as the entrypoint needs it: a JSON object of `cls`."""
        found = json.loads(value)
        if not isinstance(found, dict):
            raise argparse.ArgumentTypeError("expected a JSON object")
        if cls.__dict__.get("__pydantic_config__", {}).get("extra") == "forbid" and \
                set(found) - {field.name for field in dataclasses.fields(cls)}:
            raise argparse.ArgumentTypeError("extra inputs are not permitted")
        return found
    return parse_dataclass


parse_dataclass = dataclass_parser(StandinKVTransferConfig)  # a config that takes any keys


def add_vllm_like_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--model")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--max-loras", type=int)
    parser.add_argument("--swap-space", type=float)
    parser.add_argument("--load-format", choices=["auto", "pt", "safetensors", "dummy"])
    parser.add_argument("--max-num-batched-tokens", type=human_readable_int)
    parser.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction)
    parser.add_argument("--cudagraph-capture-sizes", type=int, nargs="+")
    parser.add_argument("--port", type=int)
    parser.add_argument("--dtype", choices=["auto", "half", "float16", "bfloat16", "float", "float32"])
    parser.add_argument("--served-model-name", nargs="+")
    parser.add_argument("--api-key", nargs="+")
    parser.add_argument("--hf-token")
    parser.add_argument("--hf-overrides", type=union_dict_and_str)
    parser.add_argument("--compilation-config", type=dataclass_parser(StandinCompilationConfig))
    parser.add_argument("--kv-transfer-config", type=dataclass_parser(StandinKVTransferConfig))
    parser.add_argument("--speculative-config", type=standin_optional_type(json.loads))
    parser.add_argument("--default-chat-template-kwargs", type=json.loads)
    for flag in ("--hf-config-path", "--tokenizer", "--chat-template", "--mm-encoder-attn-backend",
                 "--attention-backend", "--download-dir", "--quantization", "--revision"):
        parser.add_argument(flag, type=standin_optional_type(str))
    for flag in ("--tool-parser-plugin", "--generation-config", "--ssl-keyfile", "--response-role"):
        parser.add_argument(flag)
    return parser


STANDIN_BACKEND_REGISTRY = """import enum

from tests.support.vllm_033_facts import VLLM_033_VALUES


class AttentionBackendEnum(enum.Enum):
    locals().update({name: name for name in VLLM_033_VALUES.attention_backends})

    def get_class(self):
        supported = VLLM_033_VALUES.attention_backends[self.value]
        return type(self.value, (), {"supports_compute_capability":
                                     staticmethod(lambda cc: cc.major * 10 + cc.minor in supported)})
"""

MODULES = {
    ("utils", "argparse_utils.py"): "import argparse\n\n\nclass FlexibleArgumentParser(argparse.ArgumentParser):\n"
                                    "    pass\n",
    ("entrypoints", "common", "cli_args.py"): "from tests.support.standin_vllm_parser import add_vllm_like_options "
                                              "as make_arg_parser  # noqa: F401\n",
    ("reasoning", "__init__.py"): "from tests.support.standin_vllm_parser import REASONING_PARSERS\n\n\n"
                                  "class ReasoningParserManager:\n    @staticmethod\n    def list_registered():\n"
                                  "        return list(REASONING_PARSERS)\n",
    ("tool_parsers", "__init__.py"): "from tests.support.standin_vllm_parser import TOOL_PARSERS\n\n\n"
                                     "class ToolParserManager:\n    @staticmethod\n    def list_registered():\n"
                                     "        return list(TOOL_PARSERS)\n",
    # the value lists imagefacts/read.py value_lists reads, as vLLM 0.33.0 holds them
    ("config", "mamba.py"): "import enum\n\nfrom tests.support.vllm_033_facts import VLLM_033_VALUES\n\n"
                            "MambaBackendEnum = enum.Enum('MambaBackendEnum', "
                            "{name.upper(): name for name in VLLM_033_VALUES.mamba_backends})\n",
    ("model_executor", "model_loader", "__init__.py"): "from tests.support.vllm_033_facts import VLLM_033_VALUES\n\n"
                                                      "_LOAD_FORMAT_TO_MODEL_LOADER = "
                                                      "dict.fromkeys(VLLM_033_VALUES.load_formats)\n",
    ("model_executor", "layers", "quantization", "__init__.py"): "from tests.support.vllm_033_facts import "
                                                                "VLLM_033_VALUES\n\nDEPRECATED_QUANTIZATION_METHODS = "
                                                                "list(VLLM_033_VALUES.deprecated_quantization)\n",
    # the attention backends' own answer, asked for a forced backend the facts do not cover
    ("platforms", "interface.py"): "import collections\n\nDeviceCapability = collections.namedtuple("
                                   "'DeviceCapability', 'major minor')\n",
    ("v1", "attention", "backends", "registry.py"): STANDIN_BACKEND_REGISTRY,
    ("transformers_utils", "config.py"): "from tests.support.vllm_033_facts import VLLM_033_VALUES\n\n"
                                         "_CONFIG_FORMAT_TO_CONFIG_PARSER = "
                                         "dict.fromkeys(VLLM_033_VALUES.config_formats[1:])\n",
}


def write_standin_vllm_parser(root: Path) -> Path:
    """`root` holding the stand-in `vllm` package (parser and registries only); returns root."""
    for parts, source in MODULES.items():
        folder = root / "vllm"
        for part in parts[:-1]:
            folder = folder / part
        folder.mkdir(parents=True, exist_ok=True)
        for package in [root / "vllm", *[root / "vllm" / Path(*parts[:i]) for i in range(1, len(parts))]]:
            (package / "__init__.py").touch()
        (folder / parts[-1]).write_text(source)
    return root
