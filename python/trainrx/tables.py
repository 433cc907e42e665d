"""A set's events and analysis as columnar tables, queried with SQL (docs/export.md); ``trainrx.export``,
``trainrx.sql`` and ``trainrx.connect``.

``export`` writes what ``trainrx export`` writes: one folder per table (runs, ranks, steps, ops,
kernels, copies, runtime, counters, collectives, critical_path, findings), Hive-partitioned by run
and rank, so that many runs append to one dataset. ``sql`` queries it with DuckDB, each table a view
of that name with its ``run`` and ``rank`` from the folder names, and returns a pandas DataFrame::

    import trainrx
    trainrx.export("runs/2026-11-20", "dataset", run="nightly-1120")
    trainrx.sql("SELECT run, median(wall_ns) / 1e6 AS step_ms FROM steps GROUP BY run", "dataset")

The views are those of ``DATASET/views.sql`` (written by every export), so the DuckDB command line
gives the same answers: ``cd DATASET && duckdb -init views.sql``. Needs ``pip install
'trainrx[sql]'`` (pinned pyarrow, DuckDB and pandas).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional, Union

from trainrx import _native
from trainrx._paths import export_arrow_libdir
from trainrx.report import _set_options

PathLike = Union[str, "os.PathLike[str]"]

_READER = re.compile(r"\b(read_(?:parquet|csv))\('")


def export(paths: Union[PathLike, Iterable[PathLike]], dataset: PathLike, *, run: Optional[str] = None,
           format: str = "parquet", thresholds: Optional[Mapping[str, float]] = None, strict: bool = False,
           keep_clocks: bool = False, per_rank: bool = False, step: Optional[str] = None) -> Dict[str, Any]:
    """Write the tables of ``paths`` (traces or folders of rank traces) under ``dataset``, as
    ``trainrx export`` does. ``run`` names the run's partition (default: the first input's name);
    exporting a run again replaces it. Returns ``{"run", "strategy", "ranks", "files", "rows"}``.

    Raises:
        TrainrxError: bad input (the message names the file), or Parquet asked for without pyarrow.
    """
    names, overrides, flags = _set_options(paths, thresholds, strict, keep_clocks, per_rank)
    export_arrow_libdir()  # the Parquet plugin finds this Python's pyarrow wherever it is
    return json.loads(_native.export(names, os.fspath(dataset), format, run, overrides, step, flags))


def views_sql(dataset: PathLike) -> str:
    """``DATASET/views.sql`` with its table paths made absolute: the views from any working folder."""
    root = Path(dataset).resolve()
    views = root / "views.sql"
    if not views.exists():
        raise FileNotFoundError(f"{views}: not a trainrx export (no views.sql; write one with trainrx export)")
    prefix = str(root).replace("'", "''")
    return _READER.sub(lambda m: f"{m.group(1)}('{prefix}/", views.read_text())


def connect(dataset: PathLike, connection: Any = None) -> Any:
    """A DuckDB connection (``connection``, or a new in-memory one) with the dataset's views."""
    import duckdb  # pip install 'trainrx[sql]'

    con = connection if connection is not None else duckdb.connect()
    con.execute(views_sql(dataset))
    return con


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def sql(query: str, dataset: PathLike, connection: Any = None, **variables: Any) -> Any:
    """Run ``query`` over the dataset's views and return a pandas DataFrame.

    ``variables`` are set first as DuckDB variables the query reads with ``getvariable('name')``
    (the example queries in examples/sql/ take ``since`` and ``runs``), as
    ``SET VARIABLE name = value`` does on the DuckDB command line.
    """
    con = connect(dataset, connection)
    for name, value in variables.items():
        if not name.isidentifier():
            raise ValueError(f"{name!r}: a variable's name is an identifier")
        con.execute(f"SET VARIABLE {name} = {_literal(value)}")
    result = con.sql(query)
    with warnings.catch_warnings():
        # DuckDB 1.5's pandas conversion calls an argument pandas 3 deprecates: not the user's to see.
        warnings.filterwarnings("ignore", message=".*inplace keyword.*")
        return result.df()
