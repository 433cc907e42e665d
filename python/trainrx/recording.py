"""``with trainrx.record("run.json") as r:`` — a block of a script or a notebook cell recorded
in-process by trainrx's probe (no LD_PRELOAD, no relaunch), then ``r.report``.

The probe (``libtrainrx_probe.so``) is loaded with ctypes into this interpreter once torch is
imported: the one built for the libtorch this process loaded, among those ``trainrx record`` would
offer (the installed package's, ``build-compat/`` beside a build, ``~/.cache/trainrx/probe-*``). It
registers the same RecordFunction observer ``trainrx record`` attaches and writes the same trace.
What the command's Python start-up hook adds (module names, CUDA allocator marks, the
torch.profiler fallback) is not there. One in-process recording per Python process: the probe's
session (its exit and signal handlers) ends with it; restart the kernel, or use ``trainrx record``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path
from typing import Iterator, List, Optional, Union

from trainrx._native import TrainrxError
from trainrx._paths import bin_dir
from trainrx.report import PathLike, Report, analyze


def _loaded_libtorch() -> Optional[str]:
    """The libtorch_cpu this process mapped (what the preload shim checks), or None."""
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:  # "start-end perms offset dev inode path"
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and "/libtorch_cpu.so" in fields[5]:
                return fields[5].strip()
    return None


def _sidecar_lib(d: Path) -> Optional[str]:
    try:
        for line in (d / "libtrainrx_probe.torch").read_text().splitlines():
            if line.startswith("lib="):
                return line[4:]
    except OSError:
        pass
    return None


def _probe_dirs() -> List[Path]:
    """The probes ``trainrx record`` would offer, in its order (experiments/record.h ProbeChoices)."""
    dirs: List[Path] = []
    try:
        own = bin_dir()
        dirs += [own, own.parent / "build-compat"]
    except FileNotFoundError:
        pass
    xdg = os.environ.get("XDG_CACHE_HOME")
    home = os.environ.get("HOME")
    cache = Path(xdg) / "trainrx" if xdg else Path(home) / ".cache" / "trainrx" if home else None
    if cache and cache.is_dir():
        dirs += sorted(p for p in cache.iterdir() if p.name.startswith("probe-"))
    return [d for d in dirs if (d / "libtrainrx_probe.so").exists()]


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


class Recording:
    """What ``trainrx.record`` recorded.

    Attributes:
        output: the trace path asked for.
        path: the trace written (None until the block ends, or when nothing was written).
        probe_dir: the probe that recorded.
    """

    def __init__(self, output: Path, probe_dir: Path) -> None:
        self.output = output
        self.probe_dir = probe_dir
        self.path: Optional[Path] = None
        self._report: Optional[Report] = None

    @property
    def report(self) -> Report:
        """The analysis of the trace (``trainrx.analyze(path)``), made on first use."""
        if self.path is None:
            raise TrainrxError(f"no trace was written to {self.output} (is the block still running?)")
        if self._report is None:
            self._report = analyze(self.path)
        return self._report

    def _repr_html_(self) -> str:
        return self.report._repr_html_()

    def __repr__(self) -> str:
        return f"<trainrx.Recording {self.path or self.output} (probe {self.probe_dir})>"


_probe: Optional[ctypes.CDLL] = None


@contextlib.contextmanager
def record(output: PathLike = "trainrx_trace.json", *, steps: Optional[Union[int, str]] = None) -> Iterator[Recording]:
    """Record the ``with`` block in this process with trainrx's probe and write a Kineto trace.

    Args:
        output: the trace to write (``.json`` or ``.json.gz``).
        steps: keep this many steps (``"all"``: every one; default: every step of the block).

    Yields:
        a :class:`Recording`; after the block, ``.path`` is the trace and ``.report`` its analysis.

    Raises:
        TrainrxError: torch is not imported and cannot be; no probe was built for this torch (run the
            script once under ``trainrx record``, which builds one); this process was already recorded.
    """
    global _probe
    import torch  # noqa: F401  (the probe links the libtorch that this import maps)

    loaded = _loaded_libtorch()
    if loaded is None:
        raise TrainrxError("torch is imported but no libtorch_cpu.so is mapped in this process")
    dirs = _probe_dirs()
    chosen = next((d for d in dirs if _same_file(_sidecar_lib(d) or "", loaded)), None)
    if chosen is None:
        raise TrainrxError(
            f"no trainrx probe was built for the torch this interpreter loaded ({loaded}); looked in "
            + (", ".join(str(d) for d in dirs) or "no probe directory")
            + ". Reinstall trainrx into this environment (pip install --no-build-isolation <checkout>), or run "
            "a script of it once under `trainrx record`, which builds a probe for it into ~/.cache/trainrx")
    out = Path(os.path.abspath(os.fspath(output)))
    if steps is not None:
        os.environ["TRAINRX_STEPS"] = str(steps)
    cupti = chosen / "libtrainrx_cupti.so"
    if cupti.exists():
        os.environ.setdefault("TRAINRX_CUPTI_LIB", str(cupti))
    if _probe is None:
        _probe = ctypes.CDLL(str(chosen / "libtrainrx_probe.so"), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        _probe.trainrx_probe_start_in_process.argtypes = [ctypes.c_char_p]
        _probe.trainrx_probe_start_in_process.restype = ctypes.c_int
        _probe.trainrx_probe_stop_in_process.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        _probe.trainrx_probe_stop_in_process.restype = ctypes.c_int
    rc = _probe.trainrx_probe_start_in_process(os.fsencode(out))
    if rc == 2:
        raise TrainrxError("this Python process is or was already recorded (one in-process recording per process: "
                           "restart the kernel, or record the script with `trainrx record`)")
    if rc != 0:
        raise TrainrxError("the probe could not start its observer (see the message above)")
    rec = Recording(out, chosen)
    try:
        yield rec
    finally:
        buf = ctypes.create_string_buffer(4096)
        if _probe.trainrx_probe_stop_in_process(buf, len(buf)) == 0:
            rec.path = Path(os.fsdecode(buf.value))
