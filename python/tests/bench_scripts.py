"""The scripts of bench/ as modules, for their tests: bench/ is a folder of scripts, not a
package, so each test imports the script it checks from its file."""
import importlib.util
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def load(name: str, with_siblings: bool = False):
    """bench/<name>.py imported afresh (as <name>_under_test); with_siblings puts bench/ on
    sys.path first, for a script that imports the others."""
    if with_siblings and str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
