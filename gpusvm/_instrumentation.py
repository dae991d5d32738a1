"""What a user watches: the progress bar of ``verbose >= 1`` and nvtx ranges for Nsight."""

from __future__ import annotations

import contextlib
import functools
import time

import nvtx
from tqdm.auto import tqdm


def progress_bar(total, desc, verbose, unit="step"):
    """A tqdm bar on stderr counting ``total`` steps, with their rate.

    Solvers add their own figure (objective, loss, holdout error) with
    ``set_postfix``.  The bar stays on screen when it finishes, as scikit-learn's
    verbose output does, and is a no-op object when ``verbose`` is 0.
    """
    return tqdm(total=total, desc=desc, unit=unit, disable=not verbose, leave=True, mininterval=0.5, dynamic_ncols=True)


class EpochBars:
    """``verbose >= 1`` for a streamed fit: a bar over each epoch's rows, with its total
    (``rows_per_epoch`` when the source tells it, else counted in the first epoch) and so
    an estimate of the epoch's end, left on screen with the epoch's figure: a line an
    epoch.  A no-op when ``verbose`` is 0."""

    def __init__(self, desc, max_epochs, verbose, rows_per_epoch=None):
        self.desc, self.max_epochs, self.verbose = desc, max_epochs, verbose
        self.rows_per_epoch, self.bar, self.epoch, self.rows = rows_per_epoch, None, None, 0

    def update(self, epoch, rows):
        """``rows`` more rows trained in epoch ``epoch`` (0-based)."""
        if epoch != self.epoch:
            self.close()
            self.epoch, self.rows = epoch, 0
            self.bar = progress_bar(
                self.rows_per_epoch, f"{self.desc} epoch {epoch + 1}/{self.max_epochs}", self.verbose, unit="row"
            )
        self.rows += rows
        self.bar.update(rows)

    def end_epoch(self, **figures):
        """The epoch is over: its figures (``objective=...``) on its line."""
        if self.bar is not None:
            self.bar.set_postfix(figures, refresh=False)
        self.close()

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.rows_per_epoch = self.rows_per_epoch or self.rows
        self.bar = None


def nvtx_range(name, color):
    """Decorate a method so that each call is the nvtx range ``name``.

    Unlike ``@nvtx.annotate``, which binds at import time, the range is opened at call
    time, so a profiler attached later (or a test's recorder) sees it.
    """

    def decorate(method):
        @functools.wraps(method)
        def ranged(*args, **kwargs):
            with nvtx.annotate(name, color=color):
                return method(*args, **kwargs)

        return ranged

    return decorate


class PhaseClock:
    """Seconds spent in each named phase of a solver, each phase also an nvtx range.

    ``with clock.phase("level", "sbp.water_level", "purple"): ...`` adds the block's
    wall-clock time to ``clock.seconds["level"]``.  On the NumPy path a phase's work
    is done when the block ends, so the times are the phases' own; two
    ``perf_counter`` reads per phase cost well under a microsecond.
    """

    def __init__(self, names):
        self.seconds = dict.fromkeys(names, 0.0)

    @contextlib.contextmanager
    def phase(self, name, nvtx_name, color):
        started = time.perf_counter()
        with nvtx.annotate(nvtx_name, color=color):
            yield
        self.seconds[name] += time.perf_counter() - started
