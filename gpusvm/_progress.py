"""The progress bar every solver shows with ``verbose >= 1`` (silent otherwise)."""

from __future__ import annotations

from tqdm.auto import tqdm


def progress_bar(total, desc, verbose, unit="step"):
    """A tqdm bar on stderr counting ``total`` steps, with their rate.

    Solvers add their own figure (objective, loss, holdout error) with
    ``set_postfix``.  The bar stays on screen when it finishes, as scikit-learn's
    verbose output does, and is a no-op object when ``verbose`` is 0.
    """
    return tqdm(total=total, desc=desc, unit=unit, disable=not verbose, leave=True,
                mininterval=0.5, dynamic_ncols=True)
