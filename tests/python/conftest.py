"""Finds the tessera module: an installed or PYTHONPATH one first, else a build tree's
<build>/python ($TESSERA_BUILD_DIR, then build/ci)."""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _add_build_tree():
    try:
        import tessera  # noqa: F401

        return
    except ImportError as e:
        first = e
    for build in (os.environ.get("TESSERA_BUILD_DIR"), str(ROOT / "build" / "ci")):
        if build and (pathlib.Path(build) / "python" / "tessera").is_dir():
            sys.path.insert(0, str(pathlib.Path(build) / "python"))
            return
    raise ImportError("tessera is not importable: build it (cmake --preset ci && cmake --build --preset ci) "
                      f"and set TESSERA_BUILD_DIR=<build dir>, or pip install . ({first})")


_add_build_tree()
os.environ.setdefault("MPLBACKEND", "Agg")
