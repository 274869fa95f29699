"""The corpus of bad (and rightly accepted) inputs the built image's entrypoint is tried with
(tests/image/test_bad_inputs_corpus.py): settings, argv, parsers, the API key, model names. Model
folders and weights come from tests/support/bad_model_folders.py. Each bug found later adds a row.

A case: the environment on top of a good model (MODEL=/corpus/good unless given), the container's
arguments, the mode, and what must come out: `exit` 2 with one stderr line holding every `says`
(the setting named, the fix), or exit 0/1 with the `check` line (status, `says`)."""
from __future__ import annotations

import dataclasses

GOOD_MODEL = "/corpus/good"
# The key in /corpus/key. No output may show it; one case puts it in an ordinary option on purpose,
# so the search that proves its absence elsewhere is shown to find it.
PLANTED_KEY = "sk-planted-corpus-7c1d"
PLANTED_ECHO = "planted-key-echo"


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    kind: str
    env: dict
    args: tuple = ()
    mode: str = "check"
    exit: int = 2
    says: tuple = ()
    check: str | None = None      # for exit 0/1: the check whose line is judged
    status: str | None = None     # that check's status


def refused(id, kind, env=None, args=(), says=(), mode="print-command"):
    return Case(id, kind, env or {}, tuple(args), mode, 2, tuple(says))


def extra(id, words, setting):
    """An owned option smuggled in through VLLM_EXTRA_ARGS: refused naming the setting to use."""
    return refused(id, "argv", {"VLLM_EXTRA_ARGS": words}, says=("VLLM_EXTRA_ARGS", f"Set {setting} instead"))


def container(id, args, setting):
    """Container arguments exist in the serve mode only (`check` and `print-command` take none);
    a refusal there ends before anything is exec'd."""
    return refused(id, "argv", args=args, says=("the container's arguments", f"Set {setting} instead"), mode="serve")


def accepted(id, kind, env=None, args=(), says=()):
    """Rightly accepted: print-command exits 0 and its argv holds each of `says`."""
    return Case(id, kind, env or {}, tuple(args), "print-command", 0, tuple(says))


def value(id, variable, raw, expected):
    return refused(id, "settings", {variable: raw}, says=(f"bad setting {variable}=", expected))


INT_RANGE = "an integer from 1 to"
PRINTABLE = "printable characters only"

CASES = [
    # settings: numbers (ASCII only, in range)
    value("port-superscript", "PORT", "²", "an integer from 1 to 65535"),
    value("port-arabic-digits", "PORT", "٨٠٠٠", "an integer from 1 to 65535"),
    value("port-zero", "PORT", "0", "an integer from 1 to 65535"),
    value("port-too-big", "PORT", "65536", "an integer from 1 to 65535"),
    value("port-float", "PORT", "8000.0", "an integer from 1 to 65535"),
    value("port-negative", "PORT", "-1", "an integer from 1 to 65535"),
    value("port-words", "PORT", "eighty", "an integer from 1 to 65535"),
    value("port-underscore", "PORT", "8_000", "an integer from 1 to 65535"),
    value("max-model-len-1e30", "MAX_MODEL_LEN", "1" + "0" * 30, INT_RANGE),
    value("max-model-len-zero", "MAX_MODEL_LEN", "0", INT_RANGE),
    value("max-model-len-k-suffix", "MAX_MODEL_LEN", "16k", INT_RANGE),
    value("max-num-seqs-huge", "MAX_NUM_SEQS", "99999999", INT_RANGE),
    value("tp-zero", "TENSOR_PARALLEL_SIZE", "0", INT_RANGE),
    value("tp-superscript", "TENSOR_PARALLEL_SIZE", "²", INT_RANGE),
    value("pp-huge", "PIPELINE_PARALLEL_SIZE", "1000", INT_RANGE),
    value("verify-hashes-negative", "VERIFY_HASHES_SECONDS", "-1", "an integer from 0 to 3600"),
    value("verify-hashes-day", "VERIFY_HASHES_SECONDS", "86400", "an integer from 0 to 3600"),
    value("verify-hashes-minutes", "VERIFY_HASHES_SECONDS", "5m", "an integer from 0 to 3600"),
    value("download-at-start-word", "DOWNLOAD_AT_START", "please", "true or false"),
    value("gpu-util-nan", "GPU_MEMORY_UTILIZATION", "nan", "a fraction in (0, 1]"),
    value("gpu-util-above-one", "GPU_MEMORY_UTILIZATION", "1.5", "a fraction in (0, 1]"),
    value("gpu-util-zero", "GPU_MEMORY_UTILIZATION", "0", "a fraction in (0, 1]"),
    value("gpu-util-percent", "GPU_MEMORY_UTILIZATION", "90%", "a fraction in (0, 1]"),
    # settings: choices and flags
    value("dtype-unknown", "DTYPE", "bf16", "one of auto, half"),
    value("kv-dtype-unknown", "KV_CACHE_DTYPE", "int4", "one of auto"),
    value("enforce-eager-maybe", "ENFORCE_EAGER", "maybe", "true or false"),
    value("cuda-compat-unknown", "CUDA_COMPAT", "sometimes", "one of auto, on, off"),
    value("skip-checks-unknown", "SKIP_CHECKS", "fit,everything", "check names from"),
    value("hf-offline-word", "HF_HUB_OFFLINE", "perhaps", "true or false"),
    value("cuda-devices-superscript", "CUDA_VISIBLE_DEVICES", "²", "comma-separated GPU indices"),
    value("cuda-devices-repeated", "CUDA_VISIBLE_DEVICES", "0,0", "each once"),
    value("nvidia-devices-garbage", "NVIDIA_VISIBLE_DEVICES", "gpu zero", "comma-separated GPU indices"),
    # settings: JSON
    value("spec-config-not-json", "SPECULATIVE_CONFIG", "{model: x}", "a JSON object"),
    value("spec-config-list", "SPECULATIVE_CONFIG", "[]", "a JSON object"),
    value("spec-config-null", "SPECULATIVE_CONFIG", "null", "a JSON object"),
    value("spec-config-deep", "SPECULATIVE_CONFIG", "[" * 100000, "a JSON object"),
    value("spec-config-model-list", "SPECULATIVE_CONFIG", '{"model": ["/m"]}', 'a "model" that is a path'),
    value("spec-config-model-newline", "SPECULATIVE_CONFIG", '{"model": "/m\\nPASS x"}', 'a "model" that is a path'),
    value("spec-tokens-zero", "SPECULATIVE_CONFIG", '{"model": "/corpus/good", "num_speculative_tokens": 0}',
          '"num_speculative_tokens" as a JSON integer from 1 to 128, not 0'),
    value("spec-tokens-negative", "SPECULATIVE_CONFIG", '{"model": "/corpus/good", "num_speculative_tokens": -2}',
          '"num_speculative_tokens" as a JSON integer from 1 to 128, not -2'),
    value("spec-tokens-fraction", "SPECULATIVE_CONFIG", '{"model": "/corpus/good", "num_speculative_tokens": 2.5}',
          '"num_speculative_tokens" as a JSON integer from 1 to 128, not 2.5'),
    value("spec-tokens-huge", "SPECULATIVE_CONFIG", '{"model": "/corpus/good", "num_speculative_tokens": 1e12}',
          '"num_speculative_tokens" as a JSON integer from 1 to 128'),
    refused("spec-tokens-zero-extra", "argv", {"VLLM_EXTRA_ARGS": "--speculative-config.model /corpus/good "
                                                                  "--speculative-config.num_speculative_tokens 0"},
            says=("VLLM_EXTRA_ARGS --speculative-config", '"num_speculative_tokens" as a JSON integer from 1 to 128')),
    refused("drafter-conflict", "settings", {"DRAFTER": "/a", "SPECULATIVE_CONFIG": '{"model": "/b"}'},
            says=("bad setting DRAFTER=", "not both")),
    # settings: text that could forge a report line or drive a terminal
    value("model-newline", "MODEL", "/corpus/good\nPASS  fit  forged", PRINTABLE),
    value("model-escape", "MODEL", "/corpus/\x1b[2Jgood", PRINTABLE),
    value("model-carriage-return", "MODEL", "/corpus/good\rFAIL", PRINTABLE),
    value("served-name-tab", "SERVED_MODEL_NAME", "gemma\t4", PRINTABLE),
    value("served-name-bell", "SERVED_MODEL_NAME", "gemma\x07", PRINTABLE),
    value("host-with-flag", "HOST", "0.0.0.0 --port 9", "an IP address or host name"),
    value("host-newline", "HOST", "0.0.0.0\nx", PRINTABLE),
    value("hf-home-relative", "HF_HOME", "cache/hf", "an absolute path"),
    value("tmpdir-newline", "TMPDIR", "/tmp/\nx", PRINTABLE),
    value("triton-cache-relative", "TRITON_CACHE_DIR", "triton", "an absolute path"),
    value("home-relative", "HOME", "home", "an absolute path"),
    value("clamp-smem-limit-k-suffix", "TURING_CLAMP_SMEM_LIMIT", "64k", INT_RANGE),
    value("clamp-smem-limit-zero", "TURING_CLAMP_SMEM_LIMIT", "0", INT_RANGE),
    value("clamp-smem-limit-old-name-superscript", "VLLM_TURING_SMEM_LIMIT", "²", INT_RANGE),
    value("clamp-cc-dotted", "TURING_CLAMP_CC", "7.5", "an integer from 30 to 199"),
    value("clamp-fit-table-relative", "TURING_CLAMP_FIT_TABLE", "fit-table.json", "an absolute path"),
    value("inductor-cache-relative", "TORCHINDUCTOR_CACHE_DIR", "inductor", "an absolute path"),
    value("extra-args-newline", "VLLM_EXTRA_ARGS", "--seed 1\n--dtype bfloat16", "words on one line"),
    value("extra-args-unbalanced-quote", "VLLM_EXTRA_ARGS", "--chat-template 'a b", "shell-style words"),
    refused("model-unset", "settings", {"MODEL": ""}, says=("bad setting MODEL=", "Set MODEL in the env file")),
    # parsers: names this vLLM registers
    refused("tool-parser-unknown", "parsers", {"TOOL_CALL_PARSER": "gemma5"},
            says=("bad setting TOOL_CALL_PARSER='gemma5'", "a parser this vLLM registers:", "gemma4")),
    refused("reasoning-parser-unknown", "parsers", {"REASONING_PARSER": "gemma-4"},
            says=("bad setting REASONING_PARSER='gemma-4'", "a parser this vLLM registers:", "deepseek_r1")),
    value("tool-parser-path", "TOOL_CALL_PARSER", "../../x", "a parser name"),
    value("reasoning-parser-spaces", "REASONING_PARSER", "gemma4 --x", "a parser name"),
    # the API key
    refused("api-key-file-missing", "secrets", {"API_KEY_FILE": "/run/secrets/none"},
            says=("bad setting API_KEY_FILE='/run/secrets/none'", "the file does not exist")),
    refused("api-key-file-relative", "secrets", {"API_KEY_FILE": "key.txt"}, says=("API_KEY_FILE", "an absolute path")),
    refused("api-key-file-directory", "secrets", {"API_KEY_FILE": "/corpus"}, says=("API_KEY_FILE", "a regular file")),
    refused("api-key-file-device", "secrets", {"API_KEY_FILE": "/dev/zero"}, says=("API_KEY_FILE", "a regular file")),
    refused("api-key-two-sources", "secrets", {"API_KEY_FILE": "/corpus/key", "VLLM_API_KEY": "other"},
            says=("API_KEY_FILE", "VLLM_API_KEY is set too")),
    refused("hf-token-path-relative", "secrets", {"HF_TOKEN_PATH": "token"}, says=("HF_TOKEN_PATH", "an absolute path")),
    refused("hf-token-path-directory", "secrets", {"HF_TOKEN_PATH": "/corpus"}, says=("HF_TOKEN_PATH", "a regular file")),
    refused("hf-token-path-device", "secrets", {"HF_TOKEN_PATH": "/dev/zero"}, says=("HF_TOKEN_PATH", "a regular file")),
    # argv: every spelling of an option a setting owns, in VLLM_EXTRA_ARGS
    extra("dtype-extra", "--dtype bfloat16", "DTYPE"),
    extra("dtype-equals", "--dtype=bfloat16", "DTYPE"),
    extra("dtype-abbreviated", "--dt bfloat16", "DTYPE"),
    extra("port-extra", "--port 9000", "PORT"),
    extra("port-equals", "--port=9000", "PORT"),
    extra("host-extra", "--host 127.0.0.1", "HOST"),
    extra("uds-extra", "--uds /tmp/s", "HOST and PORT"),
    extra("model-extra", "--model /other", "MODEL"),
    extra("model-positional", "/other/model", "MODEL"),
    extra("served-name-underscore", "--served_model_name x", "SERVED_MODEL_NAME"),
    extra("tp-short", "-tp 2", "TENSOR_PARALLEL_SIZE"),
    extra("tp-short-equals", "-tp=2", "TENSOR_PARALLEL_SIZE"),
    extra("tp-underscore-equals", "--tensor_parallel_size=2", "TENSOR_PARALLEL_SIZE"),
    extra("pp-short", "-pp 2", "PIPELINE_PARALLEL_SIZE"),
    extra("max-model-len-abbreviated", "--max-model 99", "MAX_MODEL_LEN"),
    extra("max-num-seqs-extra", "--max-num-seqs 256", "MAX_NUM_SEQS"),
    extra("gpu-util-abbreviated", "--gpu-memory-util 0.99", "GPU_MEMORY_UTILIZATION"),
    extra("kv-dtype-extra", "--kv-cache-dtype fp8", "KV_CACHE_DTYPE"),
    extra("enforce-eager-extra", "--enforce-eager", "ENFORCE_EAGER"),
    refused("spec-config-extra-beside-setting", "argv", {"DRAFTER": "/corpus/good",
            "VLLM_EXTRA_ARGS": "--speculative-config '{\"model\": \"/d\"}'"},
            says=("VLLM_EXTRA_ARGS --speculative-config", "while SPECULATIVE_CONFIG or DRAFTER is set")),
    # found by the image tier's generated word lists: vLLM's config objects forbid keys they lack
    refused("config-object-unknown-key", "argv", {"VLLM_EXTRA_ARGS": "--fault-tolerance-config='{\"level\": 3}'"},
            says=("VLLM_EXTRA_ARGS", "--fault-tolerance-config", "unknown key(s) 'level'")),
    refused("spec-config-extra-not-an-object", "argv", {"VLLM_EXTRA_ARGS": "--speculative-config [1]"},
            says=("VLLM_EXTRA_ARGS --speculative-config", "a JSON object")),
    Case("spec-config-dotted-judged-as-drafter", "argv", {"VLLM_EXTRA_ARGS": "--speculative-config.model /corpus/none"},
         exit=1, check="drafter", status="fail", says=("/corpus/none",)),
    extra("tool-parser-extra", "--tool-call-parser hermes", "TOOL_CALL_PARSER"),
    extra("auto-tool-choice-extra", "--enable-auto-tool-choice", "TOOL_CALL_PARSER"),
    extra("reasoning-parser-extra", "--reasoning-parser deepseek_r1", "REASONING_PARSER"),
    extra("reasoning-parser-in-json", "--structured-outputs-config.reasoning_parser deepseek_r1", "REASONING_PARSER"),
    extra("api-key-extra", "--api-key sk-other", "API_KEY_FILE"),
    extra("api-key-underscore", "--api_key=sk-other", "API_KEY_FILE"),
    extra("api-key-planted", f"--api-key {PLANTED_KEY}", "API_KEY_FILE"),  # refused without echoing the key
    refused("api-key-planted-unbalanced", "secrets", {"VLLM_EXTRA_ARGS": f"--api-key {PLANTED_KEY} 'x"},
            says=("bad setting VLLM_EXTRA_ARGS=", "shell-style words")),
    refused("api-key-planted-after-short-option", "secrets", {"VLLM_EXTRA_ARGS": f"-x --api-key {PLANTED_KEY}"},
            says=("VLLM_EXTRA_ARGS", "unrecognized arguments: -x")),
    refused("enforce-eager-named-as-written", "argv", {"VLLM_EXTRA_ARGS": "--enforce-eager"},
            says=("expected no --enforce-eager:", "Set ENFORCE_EAGER instead")),
    # argv: a word meant as something else is quoted as written, never blamed on MODEL
    refused("dash-fullwidth-owned", "argv", {"VLLM_EXTRA_ARGS": "\uff0d\uff0dmax-model-len 4096"},
            says=("VLLM_EXTRA_ARGS='\uff0d\uff0dmax-model-len'", "U+FF0D", "Set MAX_MODEL_LEN instead")),
    refused("dash-em-equals", "argv", {"VLLM_EXTRA_ARGS": "\u2014seed=1"},
            says=("VLLM_EXTRA_ARGS='\u2014seed=1'", "U+2014 EM DASH", "Write '--seed=1' with ASCII hyphens")),
    refused("dash-fullwidth-container", "argv", args=("\uff0d\uff0dport", "9000"), mode="serve",
            says=("the container's arguments='\uff0d\uff0dport'", "Set PORT instead")),
    refused("args-file-word", "argv", {"VLLM_EXTRA_ARGS": "--seed 1 @/corpus/serve.args"},
            says=("VLLM_EXTRA_ARGS='@/corpus/serve.args'", "reads no @file of arguments")),
    container("dtype-container", ("--dtype", "bfloat16"), "DTYPE"),
    container("port-container", ("--port=9000",), "PORT"),
    container("model-container", ("--model", "/other"), "MODEL"),
    container("api-key-container", ("--api-key", "sk-other"), "API_KEY_FILE"),
    # argv: what cannot be judged or would not serve
    refused("config-file", "argv", {"VLLM_EXTRA_ARGS": "--config /serve.yaml"},
            says=("VLLM_EXTRA_ARGS", "a config file sets options the preflight never sees")),
    refused("hf-token-extra", "argv", {"VLLM_EXTRA_ARGS": "--hf-token hf_planted"},
            says=("VLLM_EXTRA_ARGS", "pass HF_TOKEN in the environment")),
    refused("help-extra", "argv", {"VLLM_EXTRA_ARGS": "--help"}, says=("VLLM_EXTRA_ARGS", "print its help and exit")),
    refused("help-container", "argv", args=("-h",), says=("the container's arguments", "print its help"),
            mode="serve"),
    refused("data-parallel", "argv", {"VLLM_EXTRA_ARGS": "-dp 2"}, says=("VLLM_EXTRA_ARGS", "data parallel")),
    refused("unknown-option", "argv", {"VLLM_EXTRA_ARGS": "--no-such-option 1"},
            says=("VLLM_EXTRA_ARGS", "unrecognized arguments: --no-such-option")),
    refused("missing-value", "argv", {"VLLM_EXTRA_ARGS": "--seed"}, says=("VLLM_EXTRA_ARGS", "expected one argument")),
    refused("ambiguous-abbreviation", "argv", {"VLLM_EXTRA_ARGS": "--max-lo 1"},
            says=("VLLM_EXTRA_ARGS", "ambiguous option: --max-lo")),
    # argv: values vLLM's parser refuses, paths it cannot open (its type, choices and nargs, from the image facts)
    refused("seed-not-an-int", "argv", {"VLLM_EXTRA_ARGS": "--seed abc"},
            says=("VLLM_EXTRA_ARGS", "argument --seed: invalid int value: 'abc'")),
    refused("chat-template-missing", "argv", {"VLLM_EXTRA_ARGS": "--chat-template /corpus/none.jinja"},
            says=("VLLM_EXTRA_ARGS --chat-template", "does not exist")),
    refused("chat-template-bare-name-missing", "argv", {"VLLM_EXTRA_ARGS": "--chat-template chatml"},
            says=("VLLM_EXTRA_ARGS --chat-template", "does not exist")),
    refused("tokenizer-missing", "argv", {"VLLM_EXTRA_ARGS": "--tokenizer /corpus/no-tokenizer"},
            says=("VLLM_EXTRA_ARGS --tokenizer", "does not exist")),
    refused("hf-overrides-not-an-object", "argv", {"VLLM_EXTRA_ARGS": "--hf-overrides max_position_embeddings=1"},
            says=("VLLM_EXTRA_ARGS --hf-overrides", "a JSON object")),
    refused("load-format-gguf", "argv", {"VLLM_EXTRA_ARGS": "--load-format gguf"},
            says=("VLLM_EXTRA_ARGS --load-format", "one of this vLLM's formats")),
    refused("config-format-unknown", "argv", {"VLLM_EXTRA_ARGS": "--config-format json"},
            says=("VLLM_EXTRA_ARGS --config-format", "auto, hf, mistral")),
    refused("lora-module-missing", "argv", {"VLLM_EXTRA_ARGS": "--enable-lora --lora-modules sql=/corpus/no-adapter"},
            says=("VLLM_EXTRA_ARGS --lora-modules", "does not exist")),
    refused("lora-module-bare-id", "argv", {"VLLM_EXTRA_ARGS": "--enable-lora --lora-modules org/adapter"},
            says=("VLLM_EXTRA_ARGS --lora-modules", "neither name=path nor a JSON object")),
    refused("mamba-backend-unknown", "argv", {"VLLM_EXTRA_ARGS": "--mamba-backend mamba3"},
            says=("VLLM_EXTRA_ARGS --mamba-backend", "triton, flashinfer, cpu")),
    refused("kernel-config-not-json", "argv", {"VLLM_EXTRA_ARGS": "--kernel-config '{bad'"},
            says=("VLLM_EXTRA_ARGS", "argument --kernel-config")),
    # argv: Hub revisions judged against the mounted model (vLLM ignores them for a local folder)
    refused("revision-local-folder", "argv", {"VLLM_EXTRA_ARGS": "--revision v2"},
            says=("VLLM_EXTRA_ARGS --revision='v2'", "without a fetch manifest", "ignoring --revision")),
    refused("tokenizer-revision-local-folder", "argv", {"VLLM_EXTRA_ARGS": "--tokenizer-revision main"},
            says=("VLLM_EXTRA_ARGS --tokenizer-revision='main'", "ignoring --tokenizer-revision")),
    refused("revision-hub-offline", "argv", {"MODEL": "google/gemma-4-E2B-it", "HF_HUB_OFFLINE": "1",
                                             "VLLM_EXTRA_ARGS": "--code-revision v2"},
            says=("VLLM_EXTRA_ARGS --code-revision='v2'", "HF_HUB_OFFLINE is set")),
    # argv: options that change what a check decided, re-judged on the effective config
    Case("hf-overrides-lower-limit", "argv", {"MAX_MODEL_LEN": "4096", "VLLM_EXTRA_ARGS":
         '--hf-overrides \'{"text_config": {"max_position_embeddings": 1024}}\''}, exit=1, check="model",
         status="fail", says=("above the model's limit of 1024",)),
    Case("hf-overrides-raised-limit", "argv", {"MAX_MODEL_LEN": "8192", "VLLM_EXTRA_ARGS":
         "--hf-overrides.text_config.max_position_embeddings 8192"}, exit=1, check="model", status="pass",
         says=("/corpus/good",)),
    Case("hf-config-path-missing", "argv", {"VLLM_EXTRA_ARGS": "--hf-config-path /corpus/no-config"}, exit=1,
         check="model", status="fail", says=("--hf-config-path /corpus/no-config does not exist",)),
    # rightly accepted: options no setting owns reach the argv as given
    accepted("seed", "argv", {"VLLM_EXTRA_ARGS": "--seed 1"}, says=("--seed", "1")),
    accepted("prefix-caching", "argv", {"VLLM_EXTRA_ARGS": "--enable-prefix-caching"}, says=("--enable-prefix-caching",)),
    Case("lora-rank-container", "argv", {}, ("--max-lora-rank", "8"), "serve", exit=1, check="argv", status="pass",
         says=("they set max_lora_rank",)),  # serve mode: the device checks fail here, so nothing is exec'd
    accepted("no-prefix-caching-hidden-spelling", "argv", {"VLLM_EXTRA_ARGS": "--no-enable-prefix-caching"},
             says=("--no-enable-prefix-caching",)),
    accepted("chat-template-literal-spaces", "argv", {"VLLM_EXTRA_ARGS": "--chat-template '{{ messages }} a b'"},
             says=("{{ messages }} a b",)),
    accepted("chat-template-file", "argv", {"VLLM_EXTRA_ARGS": "--chat-template /corpus/good/config.json"},
             says=("/corpus/good/config.json",)),
    accepted("tokenizer-hub-id", "argv", {"VLLM_EXTRA_ARGS": "--tokenizer google/gemma-4-E2B-it"},
             says=("google/gemma-4-E2B-it",)),
    accepted("optimization-level", "argv", {"VLLM_EXTRA_ARGS": "-O3"}, says=("-O3",)),
    accepted("triton-backend", "argv", {"VLLM_EXTRA_ARGS": "--attention-backend TRITON_ATTN"}, says=("TRITON_ATTN",)),
    accepted("api-key-file-good", "secrets", {"API_KEY_FILE": "/corpus/key"}, says=("--model",)),
    accepted(PLANTED_ECHO, "secrets", {"VLLM_EXTRA_ARGS": f"--chat-template '{{{{ \"{PLANTED_KEY}\" }}}}'"},
             says=(PLANTED_KEY,)),
    Case("api-key-file-check", "secrets", {"API_KEY_FILE": "/corpus/key"}, exit=1, check="env", status="pass",
         says=("the /v1 routes require the API key (API_KEY_FILE)",)),
    accepted("gemma4-parsers", "parsers", {"TOOL_CALL_PARSER": "gemma4", "REASONING_PARSER": "gemma4"},
             says=("--tool-call-parser", "gemma4")),
    # model names
    Case("load-format-pt-without-pt-files", "model", {"VLLM_EXTRA_ARGS": "--load-format pt"}, exit=1, check="model",
         status="fail", says=("--load-format pt loads",)),
    Case("config-format-mistral-without-params", "model", {"VLLM_EXTRA_ARGS": "--config-format mistral"}, exit=1,
         check="model", status="fail", says=("has no params.json",)),
    Case("model-relative-missing", "model", {"MODEL": "./nowhere"}, exit=1, check="model", status="fail",
         says=("does not exist",)),
    Case("hub-id-offline", "model", {"MODEL": "google/gemma-4-E2B-it", "HF_HUB_OFFLINE": "1"}, exit=1,
         check="model", status="fail", says=("HF_HUB_OFFLINE is set",)),
    Case("hub-id-not-fetched", "model", {"MODEL": "google/gemma-4-E2B-it", "HF_ENDPOINT": "http://127.0.0.1:9"},
         exit=1, check="model", status="fail", says=("is a Hub id that is not here", "fetch", "DOWNLOAD_AT_START=true")),
    Case("hub-id-no-network", "model", {"MODEL": "google/gemma-4-E2B-it", "HF_ENDPOINT": "http://127.0.0.1:9",
                                        "DOWNLOAD_AT_START": "true"},
         exit=1, check="model", status="fail", says=("the Hub cannot be reached", "127.0.0.1:9")),
]
