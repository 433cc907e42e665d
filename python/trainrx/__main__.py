"""``python -m trainrx ...`` and the ``trainrx`` console script: the trainrx binary, run in place.

The binary is executed (not wrapped in a subprocess), so its exit code, signals, terminal and
standard streams are the command's own, exactly as ``build/trainrx`` behaves.
"""

from __future__ import annotations

import os
import sys

from trainrx._paths import executable, export_arrow_libdir


def main() -> None:
    """Replace this process with ``trainrx`` and the command-line arguments."""
    try:
        exe = str(executable())
    except FileNotFoundError as e:
        print(f"trainrx: {e}", file=sys.stderr)
        sys.exit(2)
    if sys.argv[1:2] == ["export"]:
        export_arrow_libdir()  # the Parquet plugin finds this Python's pyarrow wherever it is
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
