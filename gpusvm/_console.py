"""The ``gpusvm`` console script's entry: it imports the command line (and with it
scikit-learn, a few seconds) inside a guard, so that a Ctrl-C from its start ends the
command with one line and status 130, as one during the work does (:mod:`gpusvm.cli`)."""

import sys

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


def main():
    """Run :func:`gpusvm.cli.main`; its result is the exit status."""
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        print("gpusvm: interrupted while starting; nothing was read or written.", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(run())
