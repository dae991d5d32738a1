"""verbose=1 shows a progress bar (steps, rate, the solver's figure); verbose='auto'
(the default) shows it only on long work, and erases it; verbose=0 is silent; every
solver phase opens its nvtx range, on the NumPy path too."""

import contextlib
import time

import nvtx
import numpy as np
import pytest
from tqdm import tqdm

from gpusvm import _instrumentation
from gpusvm import (
    FOBOSClassifier,
    FTRLClassifier,
    KernelPegasosSVC,
    PegasosSVC,
    RDAClassifier,
    SBPClassifier,
    TruncatedGradientClassifier,
)

# (estimator, bar title, the figure the solver keeps, nvtx ranges of its phases)
SOLVERS = [
    (PegasosSVC(max_iter=3), "Pegasos", "objective=", {"pegasos.margins", "pegasos.update", "pegasos.objective"}),
    (
        KernelPegasosSVC(max_iter=2),
        "Kernel Pegasos",
        None,
        {"kernel_pegasos.margins", "kernel_pegasos.update", "kernel_pegasos.kernel_rows"},
    ),
    (
        SBPClassifier(max_iter=2, validation_fraction=0.1),
        "SBP",
        "holdout_error=",
        {"sbp.water_level", "sbp.kernel_row", "sbp.update", "sbp.checkpoint"},
    ),
    (FTRLClassifier(max_iter=2), "online ftrl", "loss=", {"online.margins", "online.update", "online.epoch"}),
    (TruncatedGradientClassifier(max_iter=2), "online tg", "loss=", {"online.margins", "online.update"}),
    (FOBOSClassifier(max_iter=2), "online fobos", "loss=", {"online.margins", "online.update"}),
    (RDAClassifier(max_iter=2), "online rda", "loss=", {"online.margins", "online.update"}),
]
IDS = [type(solver[0]).__name__ for solver in SOLVERS]


@pytest.fixture
def data(rng):
    X = rng.normal(size=(200, 5))
    return X, (X[:, 0] + 0.5 * rng.normal(size=200) > 0).astype(int)


@pytest.mark.parametrize("estimator, title, figure, ranges", SOLVERS, ids=IDS)
def test_verbose_shows_steps_rate_and_figure(estimator, title, figure, ranges, data, capsys):
    estimator.set_params(verbose=1, random_state=0, backend="numpy").fit(*data)
    err = capsys.readouterr().err
    assert f"{title}:" in err and "step/s" in err
    final = err.rsplit("\r", 1)[-1]  # the bar as it was left: every step done
    done, total = final.split("|")[2].split()[0].split("/")
    assert done == total or figure == "holdout_error="  # SBP may stop early on its holdout
    if figure:
        assert figure in err


@pytest.mark.parametrize("verbose", [0, "auto"])
@pytest.mark.parametrize("estimator, title, figure, ranges", SOLVERS, ids=IDS)
def test_silent_when_asked_and_on_short_work_by_default(estimator, title, figure, ranges, data, capsys, verbose):
    assert type(estimator)().get_params()["verbose"] == "auto"  # the default
    estimator.set_params(verbose=verbose, random_state=0, backend="numpy").fit(*data).predict(data[0])
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


@pytest.mark.parametrize("estimator, title, figure, ranges", SOLVERS, ids=IDS)
def test_auto_shows_the_bar_once_work_is_long_and_erases_it(
    estimator, title, figure, ranges, data, capsys, monkeypatch
):
    monkeypatch.setattr(_instrumentation, "AUTO_PROGRESS_DELAY", 0.0)  # every fit counts as long
    estimator.set_params(verbose="auto", random_state=0, backend="numpy").fit(*data)
    err = capsys.readouterr().err
    assert f"{title}:" in err and "step/s" in err
    assert err.endswith("\r") and err.rsplit("\r", 2)[-2].strip() == ""  # the line blanked when the fit ended


def test_epoch_bars_count_the_wait_from_the_start_they_are_given(monkeypatch, capsys):
    """PegasosSVC.fit_chunks gives its start, before a reader's scan of its file."""
    monkeypatch.setattr(_instrumentation, "AUTO_PROGRESS_DELAY", 5.0)
    with _instrumentation.EpochBars("Scanned", 1, "auto", started=time.monotonic() - 10) as bars:
        bars.update(0, 5)
        time.sleep(0.6)  # past tqdm's half second between redraws
        bars.update(0, 5)
    assert "Scanned epoch 1/1" in capsys.readouterr().err


def test_a_streamed_fits_bars_wait_from_the_fits_start_not_each_epochs(monkeypatch, capsys):
    """Epochs of 0.1 s in a fit that has run past the delay: the next epoch's bar shows."""
    monkeypatch.setattr(_instrumentation, "AUTO_PROGRESS_DELAY", 0.15)
    bars = _instrumentation.EpochBars("Streamed", 3, "auto", rows_per_epoch=10)
    for epoch in range(3):
        bars.update(epoch, 5)
        time.sleep(0.1)
        bars.update(epoch, 5)
        bars.end_epoch(loss=0.5)
    err = capsys.readouterr().err
    assert "Streamed epoch 1/3" not in err and "Streamed epoch 3/3" in err


class SlowChunks:
    """A re-readable stream of 4 chunks, each taking ``seconds`` to read."""

    def __init__(self, X, y, seconds=0.2):
        self.X, self.y, self.seconds = X, y, seconds

    def __iter__(self):
        for part in range(4):
            time.sleep(self.seconds)
            rows = slice(part * 50, (part + 1) * 50)
            yield self.X[rows], self.y[rows]


@pytest.mark.parametrize("estimator", [PegasosSVC(max_iter=1), FTRLClassifier(max_iter=1)], ids=["Pegasos", "FTRL"])
def test_a_streamed_fits_wait_counts_its_pass_over_the_labels(estimator, data, monkeypatch, capsys):
    """A pass over the labels (0.8 s) then an epoch (0.8 s), at a delay of 1 s: the bar
    shows during the epoch (once tqdm's half-second between redraws has passed), as the
    fit has then run past the delay."""
    monkeypatch.setattr(_instrumentation, "AUTO_PROGRESS_DELAY", 1.0)
    estimator.set_params(verbose="auto", random_state=0, backend="numpy").fit_chunks(SlowChunks(*data))
    err = capsys.readouterr().err
    assert "epoch 1/1" in err and "reading the labels" not in err


def test_the_pass_over_the_labels_has_its_bar_and_gives_the_epochs_their_total(data, capsys):
    FTRLClassifier(max_iter=1, verbose=1, random_state=0, backend="numpy").fit_chunks(SlowChunks(*data, seconds=0))
    err = capsys.readouterr().err
    assert "FTRLClassifier reading the labels" in err and "200/200" in err


FAILING_STREAMED_FITS = {
    "Pegasos-missing-class": lambda X, y: PegasosSVC(class_weight="balanced", verbose=1, backend="numpy").fit_chunks(
        [(X, y)], classes=[0, 1, 2]
    ),
    "FTRL-no-rows": lambda X, y: FTRLClassifier(verbose=1, backend="numpy").fit_chunks([(X[:0], y[:0])] * 2),
    "FTRL-mixed-labels": lambda X, y: FTRLClassifier(verbose=1, backend="numpy").fit_chunks(
        [(X[:100], y[:100]), (X[100:], y[100:].astype(str))]
    ),
}


@pytest.mark.parametrize("name", FAILING_STREAMED_FITS)
def test_a_failed_streamed_fit_closes_its_bar(name, data, capsys):
    """Closed however the fit ends: an open bar would stay registered with tqdm (while
    an interactive session keeps the traceback) and push every later bar a line down."""
    with pytest.raises(ValueError) as failure:  # its traceback kept, as a session keeps it
        FAILING_STREAMED_FITS[name](*data)
    assert failure.tb is not None
    assert not [bar for bar in tqdm._instances if "reading the labels" in str(bar.desc)]
    assert capsys.readouterr().err.endswith("\n")  # verbose=1: the bar's line ended


@pytest.mark.parametrize(
    "estimator, module, name",
    [
        (PegasosSVC(max_iter=2), "gpusvm.solvers.pegasos", "primal_objective"),
        (FTRLClassifier(max_iter=2), "gpusvm.solvers.online_logistic", "shuffled_order"),
        (KernelPegasosSVC(max_iter=2), "gpusvm.solvers.kernel_pegasos._numpy", "NumpyKernelPegasosSteps.run"),
        (SBPClassifier(max_iter=2, multi_class="ovr"), "gpusvm.solvers.sbp._run", "run_step_block"),
        (SBPClassifier(max_iter=2, multi_class="ovo"), "gpusvm.solvers.sbp.pairs._run", "run_pair_block"),
    ],
    ids=["PegasosSVC", "FTRLClassifier", "KernelPegasosSVC", "SBPClassifier-ovr", "SBPClassifier-ovo"],
)
def test_a_fit_stopped_midway_closes_its_bar(estimator, module, name, rng, monkeypatch, capsys):
    """A fit stopped in its steps (Ctrl-C, an error) closes its bar: an open one would
    stay on screen under 'auto' and push later bars down."""

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    X = rng.normal(size=(300, 5))
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=300), [-0.5, 0.5])  # three classes: one-vs-one has pairs
    monkeypatch.setattr(f"{module}.{name}", stopped)
    open_before = set(tqdm._instances)
    with pytest.raises(KeyboardInterrupt) as failure:  # its traceback kept, as a session keeps it
        estimator.set_params(verbose=1, random_state=0, backend="numpy").fit(X, y)
    assert failure.tb is not None and set(tqdm._instances) <= open_before
    assert capsys.readouterr().err.endswith("\n")


@pytest.fixture
def opened_ranges(monkeypatch):
    """The names of the nvtx ranges opened while the test runs."""
    opened = []

    def recording_annotate(message=None, **kwargs):
        opened.append(message)
        return contextlib.nullcontext()

    monkeypatch.setattr(nvtx, "annotate", recording_annotate)
    return opened


@pytest.mark.parametrize("estimator, title, figure, ranges", SOLVERS, ids=IDS)
def test_each_phase_opens_its_nvtx_range(estimator, title, figure, ranges, data, opened_ranges):
    estimator.set_params(random_state=0, backend="numpy").fit(*data)
    assert ranges <= set(opened_ranges)
    opened_ranges.clear()
    estimator.predict(data[0])
    assert opened_ranges == ["predict.kernel" if hasattr(estimator, "dual_coef_") else "predict.linear"]


def test_every_range_colour_is_one_nvtx_knows_without_matplotlib():
    """nvtx resolves other colour names through matplotlib, which a user may not have."""
    import re
    from pathlib import Path

    from nvtx.colors import _NVTX_COLORS

    package = Path(__file__).resolve().parent.parent / "gpusvm"
    colours = {match for path in package.rglob("*.py") for match in re.findall(r'color="([^"]+)"', path.read_text())}
    assert colours and colours <= set(_NVTX_COLORS), colours - set(_NVTX_COLORS)
