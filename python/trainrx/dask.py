"""A set of traces analyzed on a Dask cluster (docs/export.md#dask).

Each trace file is read and analyzed on a worker (the C++ analyzer, through ``libtrainrx_api.so``,
as ``trainrx analyze --per-rank`` does on one machine's cores); what comes back is the file's ranks'
sides (steps, collectives, findings: kilobytes a rank); the client then runs the cross-rank part
(clocks, straggler, rank mismatch, findings folded) and gets the report ``trainrx analyze --per-rank``
gives for the same files, byte for byte::

    from dask.distributed import Client
    import trainrx.dask
    client = Client("scheduler:8786")                 # or LocalCluster(), SLURMCluster(), ...
    report = trainrx.dask.analyze("/shared/job-1234/traces", client)

The workers must see the files at the same paths as the client (shared storage) and have trainrx
installed (``pip install 'trainrx[dask]'``).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Union

from trainrx import _native
from trainrx.report import PathLike, Report, _set_options


def _file_sides(path: str, overrides: Sequence[str], step: Optional[str]) -> str:
    """The work of one file, run on a worker: its ranks' sides as JSON (trainrx.file_sides/1)."""
    return _native.file_sides(path, list(overrides), step)


def files(paths: Union[PathLike, Iterable[PathLike]]) -> List[str]:
    """The trace files ``paths`` stand for, in the order the set is read (folders expanded)."""
    names, _, _ = _set_options(paths, None, False, False, False)
    return json.loads(_native.expand_paths(names))


def analyze(paths: Union[PathLike, Iterable[PathLike]], client: Any = None, *,
            thresholds: Optional[Mapping[str, float]] = None, strict: bool = False,
            step: Optional[str] = None) -> Report:
    """Analyze a set of rank traces on ``client``'s workers (default: the current Dask client).

    Arguments as :func:`trainrx.analyze`; the set is always analyzed rank by rank.

    Raises:
        TrainrxError: a file that cannot be read or analyzed (raised from the worker that read it),
            or a set that is not one job's ranks with ``strict``.
    """
    if client is None:
        from distributed import get_client  # pip install 'trainrx[dask]'

        client = get_client()
    names, overrides, flags = _set_options(paths, thresholds, strict, False, True)
    expanded = files(names)
    # One task per file, in the set's order; pure=False: a file may change between two calls.
    futures = client.map(_file_sides, expanded, overrides=overrides, step=step, pure=False)
    docs = client.gather(futures)
    return Report(_native.Analysis(names, overrides, step, flags, files=expanded, docs=docs))
