"""The compiler's pipeline cut (pure parts; the image tier compiles with the real Triton)."""
import pytest

from patches.fitcheck import compiler


def triton_stages():
    return {name: (lambda module, metadata, name=name: name) for name in ("ttir", "ttgir", "llir", "ptx", "cubin")}


def test_the_cut_pipeline_keeps_tritons_stages_to_ttgir_and_makes_no_ptx_and_an_empty_binary():
    stages = triton_stages()
    kept = {name: stages[name] for name in ("ttir", "ttgir")}
    full_llir = stages["llir"]
    compiler._shared_only_stages(object(), stages, object(), "python", 75)
    assert list(stages) == ["ttir", "ttgir", "llir", "cubin"]
    assert all(stages[name] is kept[name] for name in kept)
    assert stages["llir"] is not full_llir  # the allocation passes alone (compiler._allocate_shared_memory)
    assert stages["cubin"]("", {}) == b""


def test_called_bare_the_hook_gives_triton_a_cache_key_of_its_own():
    key, key_hash = compiler._shared_only_stages()
    assert key and "shared-memory-only" in key and key_hash == key


def test_the_compile_mode_is_restored_after_an_error():
    before = compiler._MODE[0]
    with pytest.raises(RuntimeError):
        with compiler.compile_mode(compiler.SHARED_ONLY):
            assert compiler._MODE[0] == compiler.SHARED_ONLY
            raise RuntimeError
    assert compiler._MODE[0] == before == compiler.FULL
