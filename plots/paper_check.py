"""What the paper-figure scripts (plots/hetermoe*.py) share: reading a sweep's results.csv,
writing the figure and ending a --check run, every failed claim named on stderr and exit status 1."""
import csv
import os
import sys


def read_sweep(path, columns, sweep_hint):
    """The rows of the sweep CSV at `path`; exits naming the file when it cannot be read, is empty
    or lacks one of `columns` (`sweep_hint`: which scenario to sweep for it)."""
    script = os.path.basename(sys.argv[0])
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"{script}: cannot read {path}: {e.strerror}; run moesim sweep {sweep_hint} first")
    if not rows:
        sys.exit(f"{script}: {path} has no rows")
    for column in columns:
        if column not in rows[0]:
            sys.exit(f"{script}: {path} has no column {column!r}; sweep {sweep_hint}")
    return rows


def finish(fig, output, failures, checked):
    """Saves `fig` to `output` (when given), then reports the --check outcome: exits 1 naming each
    of `failures`, else says every held claim holds (when `checked`)."""
    if output:
        fig.tight_layout()
        fig.savefig(output, dpi=120)
        print(f"\nwrote {output}")
    if failures:
        for failure in failures:
            print(f"CHECK FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
    if checked:
        print("check: every held claim holds")
