"""What a user watches: the progress bar of ``verbose`` and nvtx ranges for Nsight."""

from __future__ import annotations

import contextlib
import functools
import time

import nvtx
from tqdm.auto import tqdm


# verbose='auto' (every estimator's default): a bar shows once the work has taken this many
# seconds, so that a long fit is seen to move and a short one (a test, a grid search of
# small fits) prints nothing.
AUTO_PROGRESS_DELAY = 5.0


class _Bar(tqdm):
    """tqdm whose forced redraws (``set_postfix``'s) wait for ``delay`` as its updates do:
    tqdm's own draw at once, so a figure set at every epoch would show the bar of a
    short fit."""

    def refresh(self, *args, **kwargs):
        if not self.disable and self.delay > 0 and self._time() < self.start_t + self.delay:
            return None
        return super().refresh(*args, **kwargs)


def progress_bar(total, desc, verbose, unit="step", delay=None):
    """A tqdm bar on stderr counting ``total`` steps, with their rate.

    Solvers add their own figure (objective, loss, holdout error) with
    ``set_postfix``.  With ``verbose`` 1 or more the bar shows at once and stays on
    screen when it finishes, as scikit-learn's verbose output does; with 'auto' it shows
    only after ``delay`` seconds (default :data:`AUTO_PROGRESS_DELAY`) and is erased
    when the work ends; with 0 it is a no-op object.
    """
    auto = verbose == "auto"
    return _Bar(
        total=total,
        desc=desc,
        unit=unit,
        disable=not verbose,
        leave=not auto,
        delay=(AUTO_PROGRESS_DELAY if delay is None else delay) if auto else 0.0,
        mininterval=0.5,
        dynamic_ncols=True,
    )


class EpochBars:
    """The bars of a streamed fit: a bar over each epoch's rows, with its total
    (``rows_per_epoch`` when the source tells it, else counted in the first pass) and so
    an estimate of the epoch's end, left on screen with the epoch's figure (``verbose``
    1 or more: a line an epoch), and one over the pass that finds the classes or counts
    the rows before the first epoch, if the fit makes one. With 'auto' the bars show
    once the fit has taken :data:`AUTO_PROGRESS_DELAY` seconds, and are erased; a no-op
    when ``verbose`` is 0. As a context manager it closes its bar however the fit ends."""

    COUNTING = "counting"  # the pass before the first epoch, in place of an epoch number

    def __init__(self, desc, max_epochs, verbose, rows_per_epoch=None, started=None):
        self.desc, self.max_epochs, self.verbose = desc, max_epochs, verbose
        self.rows_per_epoch, self.bar, self.epoch, self.rows = rows_per_epoch, None, None, 0
        self.started = time.monotonic() if started is None else started  # the fit's start (time.monotonic)
        self.epoch_started, self.read_seconds, self.wait_seconds = self.started, 0.0, 0.0

    def reading(self, seconds):
        """A chunk took ``seconds`` to read and make ready (on whichever thread)."""
        self.read_seconds += seconds

    def waiting(self, seconds):
        """The fit waited ``seconds`` for a chunk."""
        self.wait_seconds += seconds

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def update(self, epoch, rows):
        """``rows`` more rows trained in epoch ``epoch`` (0-based)."""
        self._advance(epoch, f"{self.desc} epoch {epoch + 1}/{self.max_epochs}", rows)

    def count(self, rows):
        """``rows`` more rows read by the pass before the first epoch (classes, row counts)."""
        self._advance(self.COUNTING, f"{self.desc} reading the labels", rows)

    def _advance(self, epoch, desc, rows):
        if epoch != self.epoch:
            self.close()
            self.epoch, self.rows = epoch, 0
            self.epoch_started, self.read_seconds, self.wait_seconds = time.monotonic(), 0.0, 0.0
            self.bar = progress_bar(
                self.rows_per_epoch,
                desc,
                self.verbose,
                unit="row",
                delay=max(0.0, self.started + AUTO_PROGRESS_DELAY - time.monotonic()),  # from the fit's start
            )
        self.rows += rows
        self.bar.update(rows)

    def end_epoch(self, **figures):
        """The epoch is over: its figures (``objective=...``) on its line, and the rates of
        its reading (rows over the seconds its chunks took to read and make ready) and of
        its steps (rows over the seconds it did not wait for chunks)."""
        if self.bar is not None:
            steps_seconds = time.monotonic() - self.epoch_started - self.wait_seconds
            for name, seconds in (("read", self.read_seconds), ("steps", steps_seconds)):
                if self.rows and seconds > 0:
                    figures[name] = f"{self.rows / seconds:,.0f} rows/s"
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
