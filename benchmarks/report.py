"""Time of ``rlverify report`` on the three kinds of target (the issue's target: each under 2 minutes).

Runs the report of Avoid 4x4 (PRISM: exact, deterministic, Pmin/Pmax, simulation, failure paths,
risk map, robustness at epsilon 1), Racetrack Barto-small (simulation and the per-cell heat map with
Storm's optimum) and the bouncing ball (abstraction and simulation), each with the command's
defaults, and prints the time per section and in total, and whether the engines agreed.

    .venv/bin/python benchmarks/report.py [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rlverify.report import make_report, write_report

TARGETS = ("avoid-v1", "racetrack-barto-small-v1", "bouncing-ball-v1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="directory for the pages (default: a temporary one)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="rlverify-report-"))
    out.mkdir(parents=True, exist_ok=True)
    for target in TARGETS:
        start = time.perf_counter()
        report = make_report(target)
        total = time.perf_counter() - start
        page = write_report(report, out / f"{target}.html", force=True)
        sections = ", ".join(f"{k} {v:.1f} s" for k, v in report.timings.items())
        print(f"{target}: {total:.1f} s in total ({sections}); engines agree: {report.ok}; "
              f"{page} ({page.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
