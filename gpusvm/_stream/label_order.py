"""Whether a stream's labels come sorted: in long runs of one class, where a shuffled
stream mixes the classes.

A streamed learner takes its rows in the order the stream gives them: the online learners
(FTRL, TG, FOBOS, RDA) a mini-batch at a time, PegasosSVC a chunk at a time (each step
draws its rows from one chunk, so the order within a chunk does not matter to it).  On a
stream sorted by label (a file written class by class, a log of one class and then the
other) every update for a while sees one class, and the model ends leaning toward the
classes seen last, far less accurate than on the same rows shuffled (the figures:
``docs/user_guide/larger_than_memory.md``).

The test cuts the first epoch, in the order learned, into *windows* of at least
``window_rows`` consecutive rows (the online learners' rows one by one; PegasosSVC's
chunks whole, a window being one chunk or a run of small ones) and counts the rows in
windows of one class.  In a random order a window of ``m`` rows holds one class with
probability ``q(m) = sum_c p_c^m`` (``p_c``: the classes' shares of the stream; drawn
with replacement, which bounds the share without), so about ``sum_w m_w q(m_w)`` rows
lie in such windows, with variance ``sum_w m_w^2 q (1 - q)``; a sorted stream puts
nearly every row in one.  :meth:`LabelRuns.warning` speaks when at least half the rows
are in windows of one class, and four standard deviations more than a random order
gives: a rare class (whose windows are of the other class by chance) does not set it
off, nor do small chunks visited in a random order (their windows mix).
"""

from __future__ import annotations

import collections

import numpy as np

# At least this share of the rows in windows of one class, and this many standard
# deviations above a random order's count, make a stream sorted.
SORTED_SHARE = 0.5
SORTED_DEVIATIONS = 4.0
# The fewest rows of a window: in a random order, 64 rows hold one class with
# probability 0.04 when 95% of the rows are of one class (0.53 at 99%, where a sorted
# stream still puts nearly every row in one).
WINDOW_ROWS = 64


class LabelRuns:
    """The rows of a stream's first epoch that came in windows of one class.

    Parameters
    ----------
    n_classes : int
    window_rows : int
        The fewest rows of a window (the last may have fewer).
    """

    def __init__(self, n_classes, window_rows=WINDOW_ROWS):
        self.window_rows = window_rows
        self.class_rows = np.zeros(n_classes, dtype=np.int64)
        self.windows = collections.Counter()  # window size -> how many windows
        self.single_class_rows = 0
        self._open = []  # the class positions of the window being filled

    def add(self, positions, whole=False):
        """The class positions (0 to ``n_classes - 1``) of the rows learned next, in the
        order learned; ``whole``: the rows are a chunk whose order does not matter (a
        window holds it whole)."""
        positions = np.asarray(positions)
        if not positions.shape[0]:
            return
        self.class_rows += np.bincount(positions, minlength=self.class_rows.shape[0])
        self._open.append(positions)
        if whole:
            if sum(part.shape[0] for part in self._open) >= self.window_rows:
                self._close()
            return
        rows = np.concatenate(self._open) if len(self._open) > 1 else positions
        full = rows.shape[0] - rows.shape[0] % self.window_rows
        if full:
            windows = rows[:full].reshape(-1, self.window_rows)
            single = int(np.count_nonzero(windows.min(axis=1) == windows.max(axis=1)))
            self.single_class_rows += self.window_rows * single
            self.windows[self.window_rows] += windows.shape[0]
        self._open = [rows[full:]] if full < rows.shape[0] else []

    def _close(self):
        """Count the window being filled, whatever its size."""
        if self._open:
            rows = np.concatenate(self._open)
            self.single_class_rows += rows.shape[0] * int(rows.min() == rows.max())
            self.windows[rows.shape[0]] += 1
            self._open = []

    def expected(self):
        """The rows in windows of one class that a random order gives: mean and standard
        deviation (see the module docstring)."""
        shares = self.class_rows / self.class_rows.sum()
        mean = variance = 0.0
        for size, count in self.windows.items():
            single = float((shares**size).sum())
            mean += count * size * single
            variance += count * size * size * single * (1.0 - single)
        return mean, variance**0.5

    def warning(self, learner, windows_words):
        """A message when the stream looks sorted, else None; ``learner`` names the
        estimator, ``windows_words`` says what its windows are."""
        self._close()
        if np.count_nonzero(self.class_rows) < 2:
            return None  # one class: nothing to mix
        n_rows = int(self.class_rows.sum())
        mean, deviation = self.expected()
        observed = self.single_class_rows
        if observed < SORTED_SHARE * n_rows or observed <= mean + SORTED_DEVIATIONS * deviation:
            return None
        return (
            f"{learner}.fit_chunks: {observed / n_rows:.0%} of the stream's rows came in {windows_words} that hold "
            f"one class only, where a shuffled stream gives about {mean / n_rows:.0%}: its labels arrive sorted or "
            "grouped by class. A streamed learner takes the rows in the order given, and on a sorted stream its "
            "model leans toward the classes seen last, far below a fit on the same rows shuffled. Shuffle the "
            "rows once before streaming them (e.g. sklearn.utils.shuffle before writing the file or cutting the "
            "chunks)."
        )
