"""ctypes over ``libtrainrx_api.so`` (api/include/trainrx/c_api.h): analyze once, render as JSON,
HTML, Markdown or text. The JSON is the one ``trainrx analyze --format json`` prints: the same
C++ calls (sets::AnalyzeSet, reports::WriteReport) with the same options.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Optional, Sequence

from trainrx._paths import bin_dir

STRICT = 1
KEEP_CLOCKS = 2
PER_RANK = 4

_lib: Optional[ctypes.CDLL] = None
_lock = threading.Lock()


class TrainrxError(Exception):
    """Bad input (a file that is not a trace, an unknown threshold, ...) or a failure inside trainrx.

    ``code`` is the exit code ``trainrx analyze`` would give: 2 for bad input, 70 for a bug.
    """

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _load() -> ctypes.CDLL:
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        lib = ctypes.CDLL(os.fspath(bin_dir() / "libtrainrx_api.so"))
        cp = ctypes.c_char_p
        ppchar = ctypes.POINTER(ctypes.c_void_p)
        lib.trainrx_version.restype = cp
        lib.trainrx_version.argtypes = []
        lib.trainrx_analyze.restype = ctypes.c_int
        lib.trainrx_analyze.argtypes = [ctypes.POINTER(cp), ctypes.c_size_t, ctypes.POINTER(cp), ctypes.c_size_t,
                                        cp, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ppchar]
        lib.trainrx_render.restype = ctypes.c_int
        lib.trainrx_render.argtypes = [ctypes.c_void_p, cp, ppchar, ctypes.POINTER(ctypes.c_size_t), ppchar]
        sz = ctypes.POINTER(ctypes.c_size_t)
        lib.trainrx_expand_paths.restype = ctypes.c_int
        lib.trainrx_expand_paths.argtypes = [ctypes.POINTER(cp), ctypes.c_size_t, ppchar, sz, ppchar]
        lib.trainrx_file_sides.restype = ctypes.c_int
        lib.trainrx_file_sides.argtypes = [cp, ctypes.POINTER(cp), ctypes.c_size_t, cp, ppchar, sz, ppchar]
        lib.trainrx_analyze_file_sides.restype = ctypes.c_int
        lib.trainrx_analyze_file_sides.argtypes = [ctypes.POINTER(cp), ctypes.c_size_t, ctypes.POINTER(cp),
                                                   ctypes.POINTER(cp), ctypes.c_size_t,
                                                   ctypes.POINTER(cp), ctypes.c_size_t, cp, ctypes.c_int,
                                                   ctypes.POINTER(ctypes.c_void_p), ppchar]
        lib.trainrx_export.restype = ctypes.c_int
        lib.trainrx_export.argtypes = [ctypes.POINTER(cp), ctypes.c_size_t, cp, cp, cp, ctypes.POINTER(cp),
                                       ctypes.c_size_t, cp, ctypes.c_int, ppchar, sz, ppchar]
        lib.trainrx_analysis_free.restype = None
        lib.trainrx_analysis_free.argtypes = [ctypes.c_void_p]
        lib.trainrx_string_free.restype = None
        lib.trainrx_string_free.argtypes = [ctypes.c_void_p]
        _lib = lib
        return lib


def _take(lib: ctypes.CDLL, p: ctypes.c_void_p, size: Optional[int] = None) -> str:
    """The C string at ``p`` as str, freed."""
    if not p.value:
        return ""
    try:
        raw = ctypes.string_at(p.value, size) if size is not None else ctypes.string_at(p.value)
        return raw.decode("utf-8", errors="replace")
    finally:
        lib.trainrx_string_free(p)


def version() -> str:
    """The version of the compiled library."""
    return _load().trainrx_version().decode()


def _strings(items: Sequence[str]) -> "ctypes.Array[ctypes.c_char_p]":
    return (ctypes.c_char_p * max(len(items), 1))(*[os.fsencode(s) for s in items])


def _text_call(name: str, *args: object) -> str:
    """Calls the C function ``name(*args, &out, &size, &error)`` and returns ``out`` as text."""
    lib = _load()
    out, error, size = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()
    rc = getattr(lib, name)(*args, ctypes.byref(out), ctypes.byref(size), ctypes.byref(error))
    if rc != 0:
        raise TrainrxError(_take(lib, error) or f"{name} failed ({rc})", rc)
    return _take(lib, out, size.value)


def expand_paths(paths: Sequence[str]) -> str:
    """The JSON array of the trace files ``paths`` stand for, in the order sets are read."""
    return _text_call("trainrx_expand_paths", _strings(paths), len(paths))


def file_sides(path: str, thresholds: Sequence[str], step: Optional[str]) -> str:
    """One trace file read and analyzed on its own: its ranks' sides as JSON (trainrx.file_sides/1)."""
    return _text_call("trainrx_file_sides", os.fsencode(path), _strings(thresholds), len(thresholds),
                      step.encode() if step else None)


def export(paths: Sequence[str], dataset: str, fmt: str, run: Optional[str], thresholds: Sequence[str],
           step: Optional[str], flags: int) -> str:
    """``trainrx export``: the summary of what was written, as JSON."""
    return _text_call("trainrx_export", _strings(paths), len(paths), os.fsencode(dataset), fmt.encode(),
                      run.encode() if run else None, _strings(thresholds), len(thresholds),
                      step.encode() if step else None, flags)


class Analysis:
    """An analysis held by the C library; rendered on demand. Freed with the object.

    Made from trace paths (``trainrx_analyze``), or from each file's sides made elsewhere
    (``trainrx_analyze_file_sides``: ``files`` the expanded ``paths`` in order, ``docs`` their sides).
    """

    def __init__(self, paths: Sequence[str], thresholds: Sequence[str], step: Optional[str], flags: int,
                 files: Optional[Sequence[str]] = None, docs: Optional[Sequence[str]] = None) -> None:
        self._lib = _load()
        self._handle = ctypes.c_void_p()
        error = ctypes.c_void_p()
        step_arg = step.encode() if step else None
        if files is None or docs is None:
            rc = self._lib.trainrx_analyze(_strings(paths), len(paths), _strings(thresholds), len(thresholds),
                                           step_arg, flags, ctypes.byref(self._handle), ctypes.byref(error))
        else:
            if len(docs) != len(files):
                raise ValueError(f"{len(files)} files but {len(docs)} file sides")
            rc = self._lib.trainrx_analyze_file_sides(_strings(paths), len(paths), _strings(files), _strings(docs),
                                                      len(files), _strings(thresholds),
                                                      len(thresholds), step_arg, flags, ctypes.byref(self._handle),
                                                      ctypes.byref(error))
        if rc != 0:
            raise TrainrxError(_take(self._lib, error) or f"trainrx_analyze failed ({rc})", rc)

    def render(self, fmt: str) -> str:
        """The report as ``fmt``: "json", "html", "md" or "text"."""
        out, error, size = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()
        rc = self._lib.trainrx_render(self._handle, fmt.encode(), ctypes.byref(out), ctypes.byref(size),
                                      ctypes.byref(error))
        if rc != 0:
            raise TrainrxError(_take(self._lib, error) or f"trainrx_render failed ({rc})", rc)
        return _take(self._lib, out, size.value)

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            self._lib.trainrx_analysis_free(handle)
            self._handle = ctypes.c_void_p()
