"""The fit verdict over measured Mamba/SSM launches (tooling/probes/ssm/verdicts.py): an autotuned kernel
fits when one configuration does (Triton's autotuner skips the rest); a plain launch must fit."""
import contextlib
import io

import pytest
from hypothesis import assume, given, strategies as st

from contract.devices import DEVICES
from tooling.probes.probe_flags import chosen, probe_parser
from tooling.probes.ssm.verdicts import FAMILIES, verdicts


def row(kernel, shared, config=None, device="sm75", limit=65536, kind="prefill"):
    return {"device": device, "limit": limit, "family": "f", "kind": kind, "kernel": kernel,
            "config": config, "shared": shared}


def test_an_autotuned_kernel_fits_when_one_configuration_does_a_plain_one_only_when_all_do():
    rows = [row("_chunk_scan_fwd_kernel", 98304, 0), row("_chunk_scan_fwd_kernel", 32768, 1),
            row("_chunk_scan_fwd_kernel", None, 2),  # did not compile
            row("_bmm_chunk_fwd_kernel", 70000, 0), row("_bmm_chunk_fwd_kernel", 65537, 1),
            row("_selective_scan_update_kernel", 1024, kind="decode"),
            row("_selective_scan_update_kernel", 65537, kind="decode", device="sm70", limit=65536),
            {"family": "f", "kind": "decode", "error": "TypeError: ..."}]  # a launcher error line is no launch
    by_kernel = {(v["device"], v["kernel"]): v for v in verdicts(rows)}
    scan = by_kernel[("sm75", "_chunk_scan_fwd_kernel")]
    assert (scan["fits"], scan["configs"], scan["compiled"], scan["fitting"], scan["smallest"]) == (True, 3, 2, 1, 32768)
    assert by_kernel[("sm75", "_bmm_chunk_fwd_kernel")]["fits"] is False
    assert by_kernel[("sm75", "_selective_scan_update_kernel")]["fits"] is True
    assert by_kernel[("sm70", "_selective_scan_update_kernel")]["fits"] is False
    assert len(by_kernel) == 4


@given(option=st.sampled_from(["--devices", "--families"]),
       name=st.text(st.characters(blacklist_characters=",", blacklist_categories=("Cs",)), min_size=1, max_size=40))
def test_a_probe_refuses_an_unknown_device_or_family_naming_it_before_any_container(option, name):
    assume(name not in DEVICES and name not in FAMILIES)
    parser = probe_parser("bench/ssm_kernels_smem", "", FAMILIES)
    said = io.StringIO()
    with contextlib.redirect_stderr(said), pytest.raises(SystemExit) as exited:
        chosen(parser, parser.parse_args([f"{option}={name}"]), FAMILIES)
    assert exited.value.code == 2 and name in said.getvalue() and "Traceback" not in said.getvalue()
