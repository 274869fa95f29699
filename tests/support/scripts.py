"""The repository's extension-less scripts (bench/*) loaded as modules, so unit tests call their pure
functions."""
import importlib.machinery
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_script(relative: str, name: str):
    """The script at REPO/relative as a module called `name`."""
    loader = importlib.machinery.SourceFileLoader(name, str(REPO / relative))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
