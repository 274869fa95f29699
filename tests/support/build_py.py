"""The repository's build.py as a module, for in-process calls of its CLI (the file's name is
no package's, and `build` would collide with the PyPA package of that name)."""
import functools
import importlib.util
from tests import REPO



@functools.cache
def build_py():
    spec = importlib.util.spec_from_file_location("vllm_turing_build_py", REPO / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
