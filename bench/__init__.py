"""gpusvm's benchmarks: one script a question, each run from the repository's root as
``python -m bench.<script> [--quick]``, writing ``bench/results/<script>-<device>.json`` and
its table (``python -m bench.make_report`` gathers them into ``bench/README.md``).

The scripts share three modules and import no other script:

- :mod:`bench.datasets`: every data set the scripts read or generate;
- :mod:`bench.common`: machine facts, timing, result files, and the settings and references
  that more than one script uses;
- :mod:`bench.peers`: the other libraries timed beside gpusvm.
"""
