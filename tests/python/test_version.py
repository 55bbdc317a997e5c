"""One version everywhere: tessera.__version__ is the top-level CMakeLists.txt's project(VERSION),
the version pyproject.toml gives pip (its regex over that file), an installed distribution's
metadata, and the first line of `tessera --version`."""

import pathlib
import re
import subprocess
from importlib import metadata

import pytest

import tessera
from test_sim import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pyproject_version():
    """The version scikit-build-core's regex provider reads, as pyproject.toml configures it."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["project"]["dynamic"] == ["version"], "pyproject.toml must not state a version of its own"
    provider = config["tool"]["scikit-build"]["metadata"]["version"]
    assert provider["provider"] == "scikit_build_core.metadata.regex"
    match = re.search(provider["regex"], (ROOT / provider["input"]).read_text(), re.MULTILINE)
    assert match, f"{provider['regex']} finds no version in {provider['input']}"
    return match.group("value")


def test_version_is_the_projects():
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", tessera.__version__), tessera.__version__
    cmake = re.search(r"project\(tessera VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)
    assert tessera.__version__ == cmake
    assert tessera.__version__ == pyproject_version()


def test_installed_metadata_agrees():
    # The suite (tools/test.sh, CI) imports the module from the build tree, where no distribution
    # exists: this check runs where tessera was installed with `pip install .` and the tests are
    # run against it. What pip would be told is checked without installing, above
    # (pyproject_version in test_version_is_the_projects).
    try:
        dist = metadata.distribution("tessera")
    except metadata.PackageNotFoundError:
        pytest.skip("tessera is imported from a build tree, not installed with pip")
    if pathlib.Path(dist.locate_file("tessera/__init__.py")).resolve() != pathlib.Path(tessera.__file__).resolve():
        pytest.skip("the installed tessera distribution is not the imported module")
    assert dist.version == tessera.__version__


def test_build_parts_name_known_parts():
    parts = tessera.build_parts.split()
    assert "python" in parts, tessera.build_parts  # this module is the python part
    assert parts == [p for p in ("ucx", "nccl", "cuda", "qt", "python") if p in parts], tessera.build_parts


def test_cli_version():
    out = subprocess.run([cli(), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"tessera {tessera.__version__}"
    assert lines[1].startswith("build: "), out.stdout
