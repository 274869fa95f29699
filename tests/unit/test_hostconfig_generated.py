"""The host's pip and CA settings build.py reads (buildtool/hostconfig.py), typed once: index URLs,
trusted hosts, pip's CA bundle. Each ends as a typed value or one refusal line naming the variable,
exit 2, its URL credentials masked; never a traceback."""
import string

import pytest
from hypothesis import example, given, strategies as st

from buildtool.hostconfig import host_ca_bundle, index_urls, pip_index_secrets, trusted_hosts
from door.problem import UsageError


def no_config(key: str) -> str:
    return ""


@pytest.mark.parametrize("variable, value, says", [
    ("PIP_INDEX_URL", "pypi.mirror.invalid/simple", "http(s):// index URLs with a host"),
    ("PIP_INDEX_URL", "https://", "http(s):// index URLs with a host"),
    ("PIP_INDEX_URL", "https://mirror.invalid:99999/simple", "http(s):// index URLs"),
    ("PIP_INDEX_URL", "https://user:hunter2@mirror.invalid:x/simple", "https://***@mirror.invalid"),
    ("PIP_EXTRA_INDEX_URL", "ftp://mirror.invalid/simple", "PIP_EXTRA_INDEX_URL="),
    ("PIP_TRUSTED_HOST", "https://mirror.invalid", "without a scheme"),
    ("PIP_TRUSTED_HOST", "mirror.invalid:0", "host:port"),
])
def test_a_pip_setting_pip_could_not_use_is_refused_naming_it(variable, value, says):
    with pytest.raises(UsageError) as raised:
        pip_index_secrets({variable: value, "PIP_INDEX_URL": "https://ok.invalid/simple", **{variable: value}},
                          no_config)
    line = str(raised.value)
    assert line.startswith(f"host setting {variable}=") and says in line and "\n" not in line, line
    assert raised.value.exit_code == 2 and "hunter2" not in line


def test_a_setting_from_pips_config_is_named_as_that_config():
    with pytest.raises(UsageError) as raised:
        pip_index_secrets({}, lambda key: "mirror.invalid/simple" if key == "global.index-url" else "")
    assert str(raised.value).startswith("host setting pip's global.index-url config=")


def test_usable_settings_are_typed():
    assert index_urls("PIP_INDEX_URL", " https://a.invalid/simple  file:///opt/simple http://[::1]:8080/s ") == \
        ("https://a.invalid/simple", "http://[::1]:8080/s")
    assert trusted_hosts("PIP_TRUSTED_HOST", "a.invalid b.invalid:8080 [::1]:3128 10.0.0.1") == \
        ("a.invalid", "b.invalid:8080", "[::1]:3128", "10.0.0.1")


@pytest.mark.parametrize("value", ["missing.pem", "."])
def test_pips_own_ca_setting_that_names_no_file_is_refused_not_passed_over(tmp_path, value):
    (tmp_path / "ssl.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    env = {"PIP_CERT": str(tmp_path / value), "SSL_CERT_FILE": str(tmp_path / "ssl.pem")}
    with pytest.raises(UsageError) as raised:
        host_ca_bundle(env, no_config, system=())
    assert str(raised.value).startswith("host setting PIP_CERT=") and "a readable CA bundle file" in str(raised.value)
    with pytest.raises(UsageError):
        host_ca_bundle({}, lambda key: str(tmp_path / value), system=())


URL_TEXT = st.text(string.ascii_letters + string.digits + ":/@.[]%?#-_ \t\n\x00é", max_size=40)


@given(st.sampled_from(["PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"]),
       URL_TEXT | st.sampled_from(["https://[::1", "http://a.invalid:65536/", "http://:80/", "https://a b"]))
@example("PIP_INDEX_URL", "https://[::1")
@example("PIP_TRUSTED_HOST", "[::1")
def test_any_pip_setting_is_typed_or_refused_in_one_line_naming_it(variable, value):
    try:
        secrets = pip_index_secrets({variable: value, "PIP_INDEX_URL": "https://ok.invalid/s", **{variable: value}},
                                    no_config)
    except UsageError as error:
        line = str(error)
        assert line.startswith(f"host setting {variable}=") and "\n" not in line and error.exit_code == 2, line
        return
    for travelled in secrets.values():
        assert travelled.isprintable() and travelled.isascii() and travelled == travelled.strip()
