"""The extra words judged as vLLM's parser will parse them (entrypoint/argv.py), with a small option
table made here by argparse from the same kinds of options vLLM's parser has. The image tier judges
the same words with the image's real table and checks the dests against vLLM's own parser."""
import argparse

import pytest

from imagefacts.shape import option_table
from entrypoint.argv import OWNED, flexible_words, judge_extra, parse_extra
from entrypoint.settings import SettingsError
from door.problem import UsageError


def table() -> dict:
    parser = argparse.ArgumentParser()  # allow_abbrev stays True, as in vLLM's FlexibleArgumentParser
    parser.add_argument("model_tag", nargs="?")
    for flags in (("--model",), ("--dtype",), ("--tensor-parallel-size", "-tp"), ("--max-model-len",),
                  ("--api-key",), ("--attention-config",), ("--attention-backend",), ("--quantization", "-q"),
                  ("--structured-outputs-config",), ("--optimization-level",), ("--seed",), ("--config",),
                  ("--served-model-name",), ("--chat-template",)):
        parser.add_argument(*flags)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
    parser.add_argument("--max-loras", type=int)
    parser.add_argument("--max-lora-rank", type=int)
    return option_table(parser)


def test_words_are_rewritten_as_vllms_flexible_parser_does():
    assert flexible_words(["--max_model_len=5", "-O3", "--attention-config.backend", "FLASH_ATTN"]) == [
        "--max-model-len=5", "--optimization-level", "3", "--attention-config", '{"backend": "FLASH_ATTN"}']
    assert flexible_words(["-O", "2"]) == ["--optimization-level", "2"]


@pytest.mark.parametrize("words, dest", [
    (["--dtype", "bfloat16"], "dtype"), (["--dtype=bfloat16"], "dtype"), (["--dt", "bfloat16"], "dtype"),
    (["--max_model_len", "99"], "max_model_len"), (["--max-model", "99"], "max_model_len"),
    (["-tp", "2"], "tensor_parallel_size"), (["-tp=2"], "tensor_parallel_size"),
    (["--tensor_parallel_size=2"], "tensor_parallel_size"), (["--api-key", "k"], "api_key"),
    (["--api_key=k"], "api_key"), (["other/model"], "model_tag"), (["--model=x"], "model"),
    (["--served-model-name", "a"], "served_model_name"), (["--enforce-eager"], "enforce_eager"),
    (["--seed", "1", "--enforce_eager"], "enforce_eager"),
])
def test_every_spelling_of_an_owned_option_is_refused_naming_its_setting(words, dest):
    with pytest.raises(SettingsError) as raised:
        judge_extra(tuple(words), (), table())
    assert raised.value.variable == "VLLM_EXTRA_ARGS" and f"Set {OWNED[dest]} instead" in str(raised.value)


def test_container_arguments_are_judged_and_named_as_such():
    with pytest.raises(SettingsError) as raised:
        judge_extra((), ("--dtype", "half"), table())
    assert raised.value.variable == "the container's arguments"


@pytest.mark.parametrize("words, says", [
    (["--config", "serve.yaml"], "a config file sets options the preflight never sees"),
    (["--structured-outputs-config.reasoning_parser", "deepseek_r1"], "Set REASONING_PARSER instead"),
    (["--structured-outputs-config", '{"reasoning_parser": "x"}'], "Set REASONING_PARSER instead"),
    (["--no-such-option", "1"], "unrecognized arguments: --no-such-option"),
    (["-tp2"], "unrecognized arguments: -tp2"),  # argparse attaches a value only to one-letter options
    (["--max-lo", "1"], "ambiguous option: --max-lo could match --max-loras, --max-lora-rank"),
    (["--seed"], "expected one argument"),
])
def test_words_vllm_would_refuse_or_the_preflight_cannot_judge_are_refused(words, says):
    with pytest.raises(SettingsError) as raised:
        judge_extra(tuple(words), (), table())
    assert says in str(raised.value)


def test_options_no_setting_owns_pass_with_their_values_for_the_checks():
    extras = judge_extra(("--seed", "1", "--attention_backend=FLASHINFER", "-q", "awq", "--no-enable-prefix-caching",
                          "--chat-template", "/t/a b.jinja"), ("--max-lora-rank", "8"), table())
    assert extras.judged and extras.words == 10
    assert extras.values == {"seed": "1", "attention_backend": "FLASHINFER", "quantization": "awq",
                             "enable_prefix_caching": False, "chat_template": "/t/a b.jinja", "max_lora_rank": 8}
    assert judge_extra(("--enable-prefix-caching",), (), table()).values == {"enable_prefix_caching": True}


def test_a_dotted_json_option_reaches_the_checks_as_json():
    extras = judge_extra(("--attention-config.backend", "FLASH_ATTN"), (), table())
    assert extras.get("attention_config") == '{"backend": "FLASH_ATTN"}'


def test_without_a_table_only_the_rechecked_options_spelled_out_are_seen():
    extras = judge_extra(("--attention-backend", "FLASH_ATTN", "--dtype", "bfloat16"), (), None)
    assert not extras.judged and extras.values == {"attention_backend": "FLASH_ATTN"}


def test_a_dotted_option_without_its_value_is_an_argv_error():
    with pytest.raises(UsageError):
        parse_extra(["--attention-config.backend"], table())


@pytest.mark.parametrize("words, word, says", [
    (["\uff0d\uff0dmax-model-len", "4096"], "\uff0d\uff0dmax-model-len",
     ("U+FF0D FULLWIDTH HYPHEN-MINUS", "Set MAX_MODEL_LEN instead")),
    (["\u2014max-model-len=4096"], "\u2014max-model-len=4096", ("U+2014 EM DASH", "Set MAX_MODEL_LEN instead")),
    (["\u2013\u2013seed", "1"], "\u2013\u2013seed", ("U+2013 EN DASH", "Write '--seed' with ASCII hyphens")),
    (["-\u2013seed=1"], "-\u2013seed=1", ("U+2013 EN DASH", "Write '--seed=1' with ASCII hyphens")),
    (["\u2212tp", "2"], "\u2212tp", ("U+2212 MINUS SIGN", "Set TENSOR_PARALLEL_SIZE instead")),
    (["--seed", "1", "@/serve.args"], "@/serve.args", ("reads no @file of arguments", "in place of the word")),
])
def test_a_word_meant_as_something_else_is_refused_quoting_it_not_blaming_model(words, word, says):
    """A look-alike dash or an @file word is a positional value to argparse (the model) or an unknown
    option: the refusal quotes the word as written and says what to write, never `Set MODEL`."""
    with pytest.raises(SettingsError) as raised:
        judge_extra(tuple(words), (), table())
    message = str(raised.value)
    assert message.startswith(f"VLLM_EXTRA_ARGS={word!r}: ") and all(part in message for part in says), message
    assert "MODEL instead" not in message.replace("MAX_MODEL_LEN", "")
    with pytest.raises(SettingsError) as raised:
        judge_extra((), tuple(words), table())
    assert str(raised.value).startswith(f"the container's arguments={word!r}: ")


def test_a_look_alike_dash_or_an_at_sign_inside_a_value_is_the_value():
    extras = judge_extra(("--chat-template", "\u2014 {{ messages }}", "--attention-backend", "@x"), (), table())
    assert extras.get("chat_template") == "\u2014 {{ messages }}" and extras.get("attention_backend") == "@x"
