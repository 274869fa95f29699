"""The one redaction of secrets in what the entrypoint prints (door/redact.py). Each case plants
a secret, shows that a plain search finds it in the text as written, then that it is gone from the
redacted text while the rest of the line stays readable."""
import pytest
from hypothesis import assume, example, given, strategies as st

from door.redact import MASK, redact, redact_words, secret_name

PLANTED = "sk-planted-redact-91f0"


@pytest.mark.parametrize("text", [
    f"--api-key {PLANTED}", f"--api_key={PLANTED}", f"--hf-token '{PLANTED} two words'",
    f"VLLM_EXTRA_ARGS='--seed 1 --api-key {PLANTED}': expected", f"--x-secret -{PLANTED}",
    f"-x --api-key {PLANTED}", f'{{"aws_secret_access_key": "{PLANTED}", "region": "eu"}}',
    f"{{'db_password': '{PLANTED}'}}", f"--download-dir https://user:{PLANTED}@host/models",
    f"HF_TOKEN={PLANTED} rest", f"--credentials={PLANTED}", f"VLLM_EXTRA_ARGS='HF_TOKEN={PLANTED}': expected",
])
def test_a_planted_secret_is_found_before_and_gone_after(text):
    assert PLANTED in text
    assert PLANTED not in redact(text) and MASK in redact(text)


@pytest.mark.parametrize("text", [
    "--max-num-batched-tokens 8192", "--ssl-keyfile /run/tls/key.pem", "API_KEY_FILE='/run/secrets/vllm-api-key'",
    "--return-tokens-as-token-ids", "--seed 7 --tokenizer org/name", '{"max_position_embeddings": 1024}',
    "https://host/path",
])
def test_what_holds_no_secret_is_left_as_it_is(text):
    assert redact(text) == text


def test_an_argv_is_masked_word_by_word():
    assert redact_words(["python3", "--api-key", PLANTED, "--seed", "1", f"--x-token={PLANTED}"]) == \
        ["python3", "--api-key", MASK, "--seed", "1", f"--x-token={MASK}"]


@pytest.mark.parametrize("name, secret", [("--api-key", True), ("HF_TOKEN", True), ("apikey", True),
                                          ("API_KEY_FILE", False), ("--hf-token-path", False), ("--tokenizer", False),
                                          ("max_num_batched_tokens", False), ("", False)])
def test_secret_names_are_told_by_their_parts(name, secret):
    assert secret_name(name.lstrip("-")) is secret


WORD = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_./=:'\"{}", max_size=12)
SECRET_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+:@"


@given(st.lists(WORD, max_size=4), st.sampled_from(["api-key", "hf_token", "x-secret", "db.password", "apikey",
                                                    "aws-secret-access-key", "my-credentials"]),
       st.sampled_from(["=", " ", "  "]), st.text(SECRET_CHARS, min_size=8, max_size=24).filter(lambda s: "--" not in s),
       st.lists(WORD, max_size=4), st.sampled_from(["--", "-"]))
@example([], "api-key", " ", "sk-abcdefgh", ["--seed", "1"], "--")
@example(["-0"], "api-key", "=", "00000000", [], "-")  # found: "-0" took "-api-key=..." as its value
def test_a_secret_after_a_secret_bearing_option_never_survives(before, name, separator, secret, after, dashes):
    text = " ".join([*before, f"{dashes}{name}{separator}{secret}", *after])
    assume(secret not in " ".join(before + after))
    assert secret in text and secret not in redact(text)
    words = [*before, f"{dashes}{name}", secret, *after]
    assert secret not in " ".join(redact_words(words))
