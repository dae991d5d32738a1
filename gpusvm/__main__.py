"""Command line: ``gpusvm demo`` (also ``python -m gpusvm demo``)."""

from __future__ import annotations

import argparse
import sys

from ._backend import BACKENDS


def build_parser():
    parser = argparse.ArgumentParser(prog="gpusvm", description="SVMs on NVIDIA GPUs, with the same results on a CPU.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="train each solver on the embedded Adult data and print a table")
    demo.add_argument("--backend", choices=BACKENDS, default="auto", help="where gpusvm trains (default: auto)")
    demo.add_argument("--quick", action="store_true", help="use 3,000 training rows (a smoke run)")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        try:
            run_demo(backend=args.backend, n_train=3000 if args.quick else None)
        except RuntimeError as error:  # e.g. --backend cupy without a device
            print(f"gpusvm: error: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
