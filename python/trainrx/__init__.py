"""trainrx: a profiler and performance doctor for PyTorch / LibTorch training loops.

The Python API runs the same C++ analysis as the ``trainrx`` command (through ``libtrainrx_api.so``)::

    import trainrx
    report = trainrx.analyze("run.json")       # a trace, a folder of rank traces, or a list
    report.findings                            # plain dicts, as `trainrx analyze --format json`
    report.steps, report.operators             # pandas DataFrames when pandas is installed
    report                                     # in Jupyter: the HTML report, inline

    with trainrx.record("run.json") as r:      # a block recorded in-process by the probe
        train(model, loader, steps=20)
    r.report

    result = trainrx.load_result("fix.json")   # fix / sweep / ab / gate results
    result.table

    trainrx.export("runs/job-1", "dataset")     # events + analysis as Parquet tables (trainrx[sql])
    trainrx.sql("SELECT run, median(wall_ns) FROM steps GROUP BY run", "dataset")   # DuckDB -> DataFrame
    trainrx.dask.analyze("runs/job-1", client)  # a set analyzed on a Dask cluster (trainrx[dask])

The command line: ``trainrx`` (on PATH after ``pip install``) or ``python -m trainrx``.
"""

from __future__ import annotations

from trainrx._native import TrainrxError
from trainrx._paths import executable, sample_trace
from trainrx.recording import Recording, record
from trainrx.report import Report, analyze
from trainrx.results import Result, load_result
from trainrx.tables import connect, export, sql

try:
    from importlib.metadata import PackageNotFoundError, version as _dist_version

    __version__ = _dist_version("trainrx")  # pyproject.toml takes it from CMakeLists.txt's project()
except PackageNotFoundError:  # a source checkout on PYTHONPATH (the tests)
    __version__ = "unknown (not installed)"

__all__ = ["Recording", "Report", "Result", "TrainrxError", "analyze", "connect", "executable", "export", "load_result",
           "record", "sample_trace", "sql",
           "__version__"]
