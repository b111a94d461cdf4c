"""Checks the integration tests run on what a test left in its directory.

Each module is one domain's checks, importable and runnable:
``python3 -m checks.search invariants EXP`` (helpers.bash: ``checks search invariants EXP``).
A check raises AssertionError, with what it saw, when its claim does not hold.
"""

import sys


def main(functions):
    """Runs the function named by argv[1] with the remaining arguments."""
    if len(sys.argv) < 2 or sys.argv[1] not in functions:
        sys.exit("usage: python3 -m checks.MODULE {%s} [ARG...]" % "|".join(functions))
    functions[sys.argv[1]](*sys.argv[2:])
