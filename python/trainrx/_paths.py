"""Where the compiled parts of trainrx are.

An installed package (``pip install .``) has them in ``trainrx/_bin/``: the ``trainrx`` binary, the
C API library ``libtrainrx_api.so``, and, when torch was importable at build time, the probe it
records with. A source checkout used without installing (the tests) names its CMake build folder in
``TRAINRX_BUILD_DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def bin_dir() -> Path:
    """The folder holding the ``trainrx`` binary and ``libtrainrx_api.so``.

    Raises:
        FileNotFoundError: neither an installed ``_bin/`` nor ``$TRAINRX_BUILD_DIR`` has them.
    """
    installed = _PACKAGE / "_bin"
    if (installed / "trainrx").exists():
        return installed
    build = os.environ.get("TRAINRX_BUILD_DIR")
    if build and (Path(build) / "trainrx").exists():
        return Path(build).resolve()
    raise FileNotFoundError(
        f"trainrx's compiled parts are not in {installed} "
        + (f"nor in TRAINRX_BUILD_DIR={build}" if build else "and TRAINRX_BUILD_DIR is not set")
        + ": install the package (pip install --no-build-isolation <checkout>) or point "
        "TRAINRX_BUILD_DIR at a CMake build folder"
    )


def arrow_libdir() -> "str | None":
    """The folder of the importable pyarrow's Arrow libraries (found without importing pyarrow), or None.

    The Parquet plugin looks for them beside the package (``site-packages/pyarrow``) and where the
    build found them; a pyarrow elsewhere on ``sys.path`` (another site-packages, a ``.pth`` file)
    is handed to it in ``TRAINRX_ARROW_LIBDIR`` (exports/sinks.cc preloads its libraries from there).
    """
    import importlib.util

    try:
        spec = importlib.util.find_spec("pyarrow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(list(spec.submodule_search_locations)[0])


def export_arrow_libdir() -> None:
    """Set ``TRAINRX_ARROW_LIBDIR`` for the plugin (this process and what it executes), if unset."""
    if not os.environ.get("TRAINRX_ARROW_LIBDIR"):
        found = arrow_libdir()
        if found:
            os.environ["TRAINRX_ARROW_LIBDIR"] = found


def executable() -> Path:
    """The ``trainrx`` command-line binary."""
    return bin_dir() / "trainrx"


def sample_trace() -> Path:
    """The built-in sample trace (a CPU training loop with planted problems)."""
    installed = _PACKAGE / "_data" / "sample_cpu_training.json.gz"
    if installed.exists():
        return installed
    source = _PACKAGE.parent.parent / "examples" / "sample_cpu_training.json.gz"
    if source.exists():
        return source
    raise FileNotFoundError(f"the sample trace is neither at {installed} nor at {source}")
