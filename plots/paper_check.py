"""What the paper-figure scripts (plots/hetermoe*.py) share: writing the figure and ending a
--check run, every failed claim named on stderr and exit status 1."""
import sys


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
