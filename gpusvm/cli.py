"""The command line: ``gpusvm train | predict | info | demo | data`` (also ``python -m gpusvm``).

``gpusvm --version`` prints the version; a bare ``gpusvm`` prints the usage, with each
command's line, on standard error and exits 2 (no command is a bad command line, as
argparse treats a missing argument); ``gpusvm --help`` prints it on standard output and exits 0.

Exit codes a script can rely on: 0 success; 1 a file, data or device problem (a missing
or damaged file, data a model rejects, ``--backend cupy`` without a GPU); 2 a bad
command line (unknown solver, unknown or misapplied option, bad option value); 130
interrupted (Ctrl-C, SIGINT), every output left whole.  Errors are one line on stderr,
``gpusvm: error: ...``; ``--debug`` shows the traceback instead.

Outputs are written beside their path and renamed into place (``_output_files``), so an
error or an interrupt leaves an earlier file whole. An existing file is replaced only when
it is one gpusvm wrote (a model file; predictions that gpusvm marked and that are unchanged
since), or with ``--force``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from importlib import resources
from pathlib import Path

import numpy as np

from ._backend import BACKENDS, ENV_VARIABLE
from ._output_files import SameFileError, check_output_path, has_mark, write_atomically, write_file
from ._registry import SOLVERS
from ._stream.chunks import chunks_through_cache
from ._version import __version__
from .data_files import FORMATS, DataFileError, data_format, read_chunks, read_data

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 128 + 2  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
# The mark (see _output_files) by which predict knows the predictions files it wrote: a
# file of one label a line (the user's own labels, say) reads the same as predictions.
PREDICTIONS_MARK = "gpusvm predictions"
# An RBF kernel SVM that takes C and trains one-vs-one, as svm-train's and ThunderSVM's
# default: at its defaults SBPClassifier() matches SVC()'s test error in less time, where
# KernelPegasosSVC() ends further above it and takes longer (bench/sbp_defaults.py; the
# figures: docs/benchmarks.md, "Headlines on a CPU").
DEFAULT_SOLVER = "sbp"
_GLOBAL_PARAMS = ("backend", "verbose")  # options of every command, not per solver
# The training accuracy train reports is read off at most this many rows, drawn at random:
# predicting every training row of a kernel model takes a large part of its fit's time, and
# 10,000 rows give the accuracy to half a point (docs/benchmarks.md, "Figures behind the code").
TRAINING_ACCURACY_ROWS = 10_000
# What each input should be, for the messages about a missing or unreadable one.
MODEL_FILE = "a model file that gpusvm train (or gpusvm.save) wrote"
DATA_FILE = "a data file (LIBSVM/svmlight, .npz or .csv)"
# gpusvm data NAME DIR: the files of the data sets that ship with gpusvm (gpusvm/data/),
# {name: {file written: shipped file (gzip)}}; gpusvm.datasets.load_adult reads the same.
SHIPPED_DATA = {"adult": {"adult_train.svm": "adult_train.svm.gz", "adult_test.svm": "adult_test.svm.gz"}}
SHIPPED_DATA_ABOUT = {  # what gpusvm data prints after the files: what they are, whose, the licence
    "adult": "Data: UCI Adult encoded as LIBSVM's a9a, 123 features, labels -1 and +1; CC BY 4.0, Becker and "
    "Kohavi (1996), UCI Machine Learning Repository, doi:10.24432/C5XW20."
}


class UsageError(Exception):
    """A bad command line (exit code 2); ``prog`` names the command it is about."""

    def __init__(self, message, prog="gpusvm"):
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message, self.prog)


# --- options from the estimators' parameters ---------------------------------------


def solver_parameters():
    """``{option parameter: {solver: default}}`` over every solver's constructor parameters."""
    table = {}
    for solver, cls in SOLVERS.items():
        for name, default in cls().get_params(deep=False).items():
            if name not in _GLOBAL_PARAMS:
                table.setdefault(name, {})[solver] = default
    return table


def parse_value(text):
    """An option's value: none, true/false, an int, a float (also inf), a JSON object
    (for ``--class-weight``, its keys read as numbers where they are), else the text."""
    lowered = text.strip().lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    if text.lstrip().startswith("{"):
        try:
            mapping = json.loads(text)
        except json.JSONDecodeError as error:
            raise argparse.ArgumentTypeError(f"not a JSON object: {error}") from None
        return {parse_value(key): value for key, value in mapping.items()}
    return text


def _option(name):
    return "--" + name.replace("_", "-")


# What each solver option means, one line (the estimators' docstrings say more). Where
# solvers read a parameter differently, the line says so, solver by solver; --gamma is two
# parameters that share a name: the kernel's width (kernel-pegasos, sbp) and RDA's step damping.
OPTION_MEANINGS = {
    "C": "regularization, as SVC's C: larger fits the training rows harder (pegasos, kernel-pegasos: "
    "unless --lam is given; sbp: the C that --nu auto matches)",
    "lam": "Pegasos' lambda, the weight of the regularization; none: 1 / (C * rows)",
    "average": "true: return the average of the iterates; false: the last iterate "
    "(pegasos also takes an int m: the plain average from step m on)",
    "batch_size": "rows per step ('auto': chosen from the number of rows)",
    "class_weight": "a weight per class multiplying the rows' weights: 'balanced' or a JSON object, e.g. '{\"1\": 2}'",
    "fit_intercept": "fit a bias term (true or false)",
    "max_iter": "the most epochs (passes over the rows) a fit runs; a stopping rule (--tol) can end it sooner",
    "n_iter_no_change": "what the stopping rule looks back over: pegasos, epochs; sbp, checkpoints (10 an epoch)",
    "projection": "project the weights onto the ball of radius 1 / sqrt(lam) after each step",
    "random_state": "the seed: an int gives the same fit on numpy and cupy; none, a fresh one",
    "tol": "stop when the objective improves by less than TOL over --n-iter-no-change epochs (pegasos) or "
    "checkpoints (sbp, relative gain); none: run every epoch",
    "cache_size": "megabytes of kernel rows kept on the host, numpy backend ('auto': a quarter of the free memory)",
    "coef0": "the constant term of the poly kernel",
    "degree": "the degree of the poly kernel",
    "gamma": "two parameters of one name. kernel-pegasos, sbp: the rbf or poly kernel's gamma, larger for a "
    "narrower kernel ('scale': 1 / (features * X.var()), 'auto': 1 / features, or a number); rda: not a "
    "kernel's, the step damping beta_t = gamma * sqrt(t), larger for smaller, more conservative steps",
    "kernel": "the kernel: rbf, linear or poly",
    "kernel_cache": "device memory for the whole kernel matrix, cupy backend: a fraction of the free memory "
    "(0 to 1) or bytes (an int; 0: never)",
    "decision_function_shape": "the scores of a one-vs-one model of more than two classes: ovr, a column a "
    "class; ovo, a column a pair",
    "kernel_dtype": "the dtype of the kernel values: float32, float64, or auto (float32 where it keeps the digits)",
    "max_kernel_evals": "stop before the step that would pass this many kernel evaluations (none: no limit)",
    "multi_class": "how more than two classes train: ovo, a problem per pair of classes (as SVC); ovr, a "
    "problem per class against the rest",
    "nu": "the mean slack allowed to a unit-norm predictor, at least 0 ('auto': read off a pilot SVC with --C)",
    "time_budget": "stop after this many seconds (none: no limit)",
    "validation_fraction": "share of the rows held out to stop on their error (0: none; 'auto': none below "
    "50,000 rows, else a tenth, at most 10,000)",
    "alpha": "the learning rate's scale (> 0)",
    "beta": "the learning rate's smoothing (>= 0)",
    "l1": "the L1 penalty, larger for sparser weights. ftrl: on the scale of the summed loss (lambda * rows); "
    "truncated-gradient, fobos, rda: per row, the lambda of mean loss + lambda * |w|_1",
    "l2": "the L2 penalty, on the scale of the summed loss; it shrinks weights, not their number",
    "shuffle": "visit each epoch's rows in a fresh random order (true or false)",
    "eta0": "the step size's scale (> 0)",
    "theta": "truncate only the weights with |w| <= THETA (inf: all)",
    "truncate_every": "truncate every K rows, by K times the L1 gravity",
}


def _defaults_text(defaults):
    """``{solver: default}`` as ``pegasos: 1000; sbp, ftrl: 5``: the solvers an option
    applies to, those of one default together."""
    solvers_by_default = {}
    for solver, default in defaults.items():
        solvers_by_default.setdefault(repr(default), []).append(solver)
    return "; ".join(f"{', '.join(solvers)}: {default}" for default, solvers in solvers_by_default.items())


def _add_solver_options(parser):
    group = parser.add_argument_group(
        "solver options",
        "each applies to the solvers in brackets, whose defaults (the estimator's) it shows; "
        "VALUE is a number, true/false, none, a word or a JSON object",
    )
    for name, defaults in solver_parameters().items():
        meaning = OPTION_MEANINGS.get(name, "see the estimator's documentation")
        group.add_argument(
            _option(name),
            dest=f"param_{name}",
            metavar="VALUE",
            type=parse_value,
            default=argparse.SUPPRESS,
            help=f"{meaning} [{_defaults_text(defaults)}]",
        )


def solver_estimator(solver, args):
    """The estimator of ``--solver`` with the options given, its parameters checked."""
    from sklearn.utils._param_validation import InvalidParameterError

    cls = SOLVERS[solver]
    allowed = cls().get_params(deep=False)
    params = {key[len("param_") :]: value for key, value in vars(args).items() if key.startswith("param_")}
    for name in params:
        if name not in allowed:
            own = ", ".join(_option(p) for p in allowed if p not in _GLOBAL_PARAMS)
            raise UsageError(f"{_option(name)} does not apply to --solver {solver} (its options: {own}).")
    model = cls(**params, backend=args.backend, verbose="auto" if args.verbose is None else args.verbose)
    try:
        model._validate_params()
    except InvalidParameterError as error:
        raise UsageError(f"--solver {solver}: {error}") from None
    return model


# --- the parser --------------------------------------------------------------------


def build_parser():
    """The ``gpusvm`` argument parser."""
    common = _Parser(add_help=False)
    common.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help=f"where gpusvm runs (default: auto, which honours {ENV_VARIABLE})",
    )
    common.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser = _Parser(
        prog="gpusvm",
        description="SVMs and sparse online classifiers on NVIDIA GPUs, with the same results on a CPU.",
        epilog="'gpusvm COMMAND --help' shows a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"gpusvm {__version__}", help="print the version")
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND", parser_class=_Parser)

    train = commands.add_parser(
        "train",
        parents=[common],
        help="train a model on a data file and save it",
        description="Train a model on DATA (svmlight, .npz or .csv) and write it to MODEL.",
    )
    train.add_argument("data", metavar="DATA", help="training data (labels required)")
    train.add_argument(
        "model",
        metavar="MODEL",
        nargs="?",
        help="model file to write (default: DATA's file name plus .model, in this folder)",
    )
    train.add_argument(
        "--solver", choices=tuple(SOLVERS), default=DEFAULT_SOLVER, help=f"the solver (default: {DEFAULT_SOLVER})"
    )
    train.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="DATA's format (default: from its extension; svmlight unless .npz or .csv)",
    )
    train.add_argument(
        "--n-features",
        type=int,
        metavar="N",
        help="the number of features, when DATA (svmlight) may not use the last ones",
    )
    train.add_argument(
        "--chunk-rows",
        type=int,
        metavar="N",
        help="read DATA (svmlight or .npz) N rows at a time, for a file larger than memory "
        "(linear and online solvers); shows each epoch's progress on standard error",
    )
    cache = train.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache-file",
        metavar="PATH",
        help="with --chunk-rows and an svmlight DATA: keep the parsed chunks in PATH, so that every "
        "epoch after the first, and later runs on the same file, read them instead of the text "
        "(default: a temporary cache, removed at the end)",
    )
    cache.add_argument(
        "--no-cache",
        action="store_true",
        help="with --chunk-rows: parse the text of DATA every epoch (no chunk cache)",
    )
    shown = train.add_mutually_exclusive_group()
    shown.add_argument(
        "-v", "--verbose", action="count", help="show a progress bar from the start (default: once a fit takes 5 s)"
    )
    shown.add_argument("-q", "--quiet", dest="verbose", action="store_const", const=0, help="show no progress")
    train.add_argument(
        "--force",
        action="store_true",
        help="replace MODEL even when it exists and is not a gpusvm model file (never DATA)",
    )
    _add_solver_options(train)

    predict = commands.add_parser(
        "predict",
        parents=[common],
        help="predict with a saved model",
        description="Predict the rows of DATA with MODEL; print accuracy when DATA has labels.",
    )
    predict.add_argument("model", metavar="MODEL", help="model file that gpusvm train wrote")
    predict.add_argument("data", metavar="DATA", help="data to predict (svmlight, .npz or .csv; labels optional)")
    predict.add_argument(
        "out",
        metavar="OUT",
        nargs="?",
        help="where predictions go, one row per line (default, or '-': standard output)",
    )
    predict.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="DATA's format (default: from its extension; svmlight unless .npz or .csv)",
    )
    predict.add_argument(
        "--force",
        action="store_true",
        help="replace OUT even when it exists and is not a predictions file gpusvm wrote (never MODEL or DATA)",
    )
    kind = predict.add_mutually_exclusive_group()
    kind.add_argument(
        "--decision-values",
        action="store_true",
        help="decision values instead of labels: one column for two classes (the second "
        "class's), else one per class in the model's order",
    )
    kind.add_argument(
        "--probability", action="store_true", help="class probabilities, one column per class (logistic solvers only)"
    )

    info = commands.add_parser(
        "info",
        parents=[common],
        help="print the versions, the backend, the devices and whether the kernels compile",
        description="Print the versions, the backend gpusvm picks, the CUDA devices and whether the kernels compile.",
    )
    info.add_argument("--json", action="store_true", help="print the facts as JSON")

    demo = commands.add_parser(
        "demo",
        parents=[common],
        help="time gpusvm's solvers beside scikit-learn's on the Adult data that ships with gpusvm",
        description="Fit gpusvm's solvers and scikit-learn's on the Adult data that ships with gpusvm; "
        "print their times and test accuracies.",
    )
    size = demo.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="use 3,000 training rows (under 20 s on 2 cores)")
    size.add_argument(
        "--full", action="store_true", help="use all 32,561 training rows, as the README's headline table (minutes)"
    )

    data = commands.add_parser(
        "data",
        help="write a data set that ships with gpusvm as svmlight files",
        description="Write a data set that ships with gpusvm into DIR as svmlight files, to train and "
        "predict on. adult: UCI Adult encoded as LIBSVM's a9a (123 features, labels -1/+1), "
        "adult_train.svm (32,561 rows) and adult_test.svm (16,281 rows); CC BY 4.0, Becker and Kohavi "
        "(1996). An existing file is never replaced.",
    )
    data.add_argument("name", metavar="NAME", choices=tuple(SHIPPED_DATA), help="the data set: adult")
    data.add_argument(
        "folder",
        metavar="DIR",
        nargs="?",
        default=".",
        help="the folder to write into, made if missing (default: the current folder)",
    )
    data.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return parser


# --- the commands ------------------------------------------------------------------


def train_command(args, out):
    from .model_io import check_model_path, save

    model = solver_estimator(args.solver, args)
    if args.n_features is not None and args.n_features < 1:
        raise UsageError(f"--n-features must be at least 1, got {args.n_features}.", "gpusvm train")
    check_input(args.data, "DATA", DATA_FILE)
    path = args.model if args.model else Path(args.data).name + ".model"
    path = _checked_output(
        "gpusvm train",
        check_model_path,
        path,
        overwrite=args.force,  # before a long fit
        inputs=[("DATA", args.data)],
        overwrite_hint="--force",
    )
    args.pending_output = ("the model", path)  # for the message of an interrupt before it is written
    if args.chunk_rows is not None:
        return _train_on_chunks(model, args, path, out)
    if args.cache_file is not None or args.no_cache:
        option = "--cache-file" if args.cache_file is not None else "--no-cache"
        raise UsageError(f"{option} goes with --chunk-rows (a file read whole is parsed once).", "gpusvm train")
    X, y, how = read_data(args.data, args.format, n_features=args.n_features)
    if y is None:
        raise ValueError(f"{args.data} has no labels to train on.")
    started = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - started
    save(model, path, metadata={"data": {"file": str(args.data), **how}, "fit_seconds": seconds}, overwrite=args.force)
    args.pending_output = None
    out(
        f"Trained {type(model).__name__} (--solver {args.solver}) on {X.shape[0]} rows x {X.shape[1]} features "
        f"with {model.backend_} in {seconds:.3f} s; {_training_accuracy(model, X, y)}."
    )
    out(f"Model written to {path}")
    return EXIT_OK


def _training_accuracy(model, X, y):
    """The model's accuracy on its training rows, on ``TRAINING_ACCURACY_ROWS`` of them
    drawn at random when there are more (its standard error then at most 0.5 points)."""
    n_rows = X.shape[0]
    if n_rows <= TRAINING_ACCURACY_ROWS:
        return f"training accuracy {model.score(X, y):.4%}"
    rows = np.sort(np.random.default_rng(0).choice(n_rows, TRAINING_ACCURACY_ROWS, replace=False))
    return (
        f"training accuracy {model.score(X[rows], y[rows]):.2%} "
        f"(on {TRAINING_ACCURACY_ROWS:,} of its rows, drawn at random)"
    )


def _train_on_chunks(model, args, path, out):
    """``train --chunk-rows N``: the streamed fit, one chunk of the file in memory at a time."""
    if args.chunk_rows < 1:
        raise UsageError(f"--chunk-rows must be at least 1, got {args.chunk_rows}.", "gpusvm train")
    if not hasattr(model, "fit_chunks"):
        streamed = ", ".join(name for name, cls in SOLVERS.items() if hasattr(cls, "fit_chunks"))
        raise UsageError(
            f"--chunk-rows trains {streamed}; --solver {args.solver} needs every row at every step "
            "(leave --chunk-rows out).",
            "gpusvm train",
        )
    chunks = read_chunks(args.data, args.format, chunk_rows=args.chunk_rows, n_features=args.n_features)
    if args.cache_file is not None and not hasattr(chunks, "with_cache"):
        raise UsageError(
            f"--cache-file keeps an svmlight file's parsed chunks; {args.data} is not svmlight.", "gpusvm train"
        )
    cache_file = None if args.no_cache else (args.cache_file or "auto")
    # the scan that counts the rows, and every epoch: more than one pass
    with chunks_through_cache(chunks, cache_file, n_passes=2) as chunks:
        return _fit_streamed(model, args, path, out, chunks)


def _fit_streamed(model, args, path, out, chunks):
    from .model_io import save

    if chunks.n_rows == 0:  # (the scan that counts them is the one the fit needs first)
        raise DataFileError(f"{args.data} has no data rows to train on.")
    if model.verbose == "auto":  # a streamed fit can take long: a line an epoch, with its rows, rate and time left
        model.set_params(verbose=1)
    how = {"format": data_format(args.data, args.format), "chunk_rows": args.chunk_rows}
    if how["format"] == "svmlight":
        how["zero_based"] = chunks.zero_based
    started = time.perf_counter()
    model.fit_chunks(chunks)
    seconds = time.perf_counter() - started
    save(model, path, metadata={"data": {"file": str(args.data), **how}, "fit_seconds": seconds}, overwrite=args.force)
    args.pending_output = None
    rows = chunks.n_rows * model.n_iter_
    out(
        f"Trained {type(model).__name__} (--solver {args.solver}) on {chunks.n_rows} rows x {chunks.n_features} "
        f"features, {args.chunk_rows} rows at a time, with {model.backend_}: {model.n_iter_} epoch(s) in "
        f"{seconds:.3f} s ({rows / seconds:,.0f} rows/s)."
    )
    out(f"Model written to {path}")
    return EXIT_OK


def predict_command(args, out):
    from .model_io import load

    if args.out == "-":
        args.out = None  # standard output, as the usual '-' says
    check_input(args.model, "MODEL", MODEL_FILE)
    check_input(args.data, "DATA", DATA_FILE)
    if args.out:  # before the work: OUT must not be an input, nor a file that predictions should not replace
        _checked_output(
            "gpusvm predict",
            check_output_path,
            args.out,
            what="the predictions",
            kind="a predictions file gpusvm wrote (unchanged since)",
            replaceable=lambda path: has_mark(path, PREDICTIONS_MARK),
            overwrite=args.force,
            inputs=[("MODEL", args.model), ("DATA", args.data)],
            overwrite_hint="--force",
            special=True,
        )
        args.pending_output = ("the predictions", args.out)
    model = load(args.model, backend=args.backend)
    data = model.metadata_.get("data", {}) if isinstance(model.metadata_, dict) else {}
    zero_based = data.get("zero_based", "auto") if data.get("format") == "svmlight" else "auto"
    X, y, _ = read_data(args.data, args.format, n_features=model.n_features_in_, zero_based=zero_based)
    if args.probability and not hasattr(model, "predict_proba"):
        raise UsageError(
            f"--probability needs a logistic solver (ftrl, truncated-gradient, fobos, rda); "
            f"{args.model} holds a {type(model).__name__}."
        )
    scores = model.decision_function(X)  # once: the labels are read off these scores
    labels = model._labels_from_scores(scores)
    if args.probability:
        lines = _number_lines(model.predict_proba(X))
    elif args.decision_values:
        lines = _number_lines(scores)
    else:
        lines = [_label_text(label) for label in labels]
    text = "".join(line + "\n" for line in lines)
    if args.out:
        write_file(args.out, text.encode("utf-8"), mark=PREDICTIONS_MARK)
        args.pending_output = None
    else:
        sys.stdout.write(text)
    if y is not None:
        correct = int(np.sum(labels == y))
        report = out if args.out else (lambda line: print(line, file=sys.stderr))
        report(f"Accuracy = {correct / len(y):.4%} ({correct}/{len(y)})")
        unknown = [label for label in np.unique(y) if not np.any(model.classes_ == label)]
        kinds = {_label_kind(y), _label_kind(model.classes_)}
        if unknown and len(kinds) == 2:  # '1' and 1.0 print alike: say what differs
            report(
                f"Note: DATA's labels are {_label_kind(y)} ({_few_labels(np.unique(y))}), the model's classes "
                f"{_label_kind(model.classes_)} ({_few_labels(model.classes_)}): no row's label can match."
            )
        elif unknown:  # e.g. a class the training data lacked: every such row counts as wrong
            one = len(unknown) == 1
            report(
                f"Note: DATA's {'label' if one else 'labels'} {_few_labels(unknown)} "
                f"{'is not a class' if one else 'are not classes'} of the model ({_few_labels(model.classes_)}): "
                f"{'its' if one else 'their'} rows count as wrong."
            )
    return EXIT_OK


def check_input(path, name, kind):
    """Refuse an input that cannot be read, in one line that names its argument
    (``'MODEL'``), its path and what it should be (``kind``): a missing file, a folder, a
    symbolic link to nothing, a file without read permission. What the file holds is the
    reader's to check."""
    text = str(path)
    path = Path(path)
    if text == "":
        raise FileNotFoundError(f"{name} is an empty path: give {kind}.")
    if path.is_dir():
        raise IsADirectoryError(f"{name} {text!r} is a folder: give {kind}.")
    if path.is_symlink() and not path.exists():
        raise FileNotFoundError(
            f"{name} {text!r} is a symbolic link to {os.readlink(path)!r}, which does not exist: give {kind}."
        )
    if not path.exists():
        raise FileNotFoundError(f"{name} {text!r} does not exist: give {kind}.")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"{name} {text!r} cannot be read (no read permission): give {kind}.")


def _checked_output(prog, check, path, **kwargs):
    """``check(path, **kwargs)``: a path to write; an input given as the output is a usage error of ``prog``."""
    try:
        return check(path, **kwargs)
    except SameFileError as error:
        raise UsageError(str(error), prog) from None


def _number_lines(values):
    values = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    return [" ".join(repr(float(v)) for v in row) for row in values]


def _label_kind(labels):
    return "numbers" if np.asarray(labels).dtype.kind in "biuf" else "strings"


def _few_labels(labels, shown=5):
    texts = [_label_text(label) for label in labels]
    return ", ".join(texts[:shown]) + (f" and {len(texts) - shown} more" if len(texts) > shown else "")


def _label_text(label):
    """``1.0`` -> ``1`` (svmlight labels are floats), other labels as they are."""
    if isinstance(label, (float, np.floating)) and float(label).is_integer():
        return str(int(label))
    return str(label)


def info_command(args, out):
    from ._device.system_info import system_info

    info = system_info(args.backend)
    if args.json:
        out(json.dumps(info, indent=2))
    else:
        for line in _info_lines(info):
            out(line)
    if info["backend_error"]:
        raise RuntimeError(info["backend_error"])
    return EXIT_OK


def _info_lines(info):
    yield f"gpusvm {info['gpusvm']} (Python {info['python']}, {info['platform']})"
    yield f"numpy {info['numpy']}, scipy {info['scipy']}, scikit-learn {info['scikit-learn']}"
    chosen = info["backend"] or "unavailable"
    yield (f"backend: {chosen} (asked for {info['backend_requested']}; {ENV_VARIABLE}={info[ENV_VARIABLE] or 'unset'})")
    yield f"cupy: {info['cupy'] or 'not installed'}"
    if info["cuda_runtime"]:
        yield f"CUDA runtime {info['cuda_runtime']}, driver {info['cuda_driver']}"
    for device in info["devices"]:
        yield (
            f"device {device['index']}: {device['name']}, compute capability {device['compute_capability']}, "
            f"{device['memory_gib']} GiB"
        )
    if not info["devices"]:
        yield "device: none (no CUDA device visible to CuPy)"
    if info["kernels"] is None:
        yield "kernels: not compiled (no CUDA device)"
    else:
        failed = {name: result for name, result in info["kernels"].items() if result != "ok"}
        yield f"kernels: {len(info['kernels']) - len(failed)}/{len(info['kernels'])} compile on device 0"
        for name, result in failed.items():
            yield f"  {name}: {result.splitlines()[0]}"


def demo_command(args, out):
    from .demo import run_demo

    run_demo(backend=args.backend, n_train=3000 if args.quick else None, out=out, full=args.full)
    return EXIT_OK


def data_command(args, out):
    """``gpusvm data NAME DIR``: a shipped data set's files, decompressed, into DIR; an
    existing file is never replaced (each is written beside and renamed into place)."""
    folder = Path(args.folder)
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"DIR {args.folder!r} is a file: give a folder (it is made if missing).")
    targets = {folder / name: shipped for name, shipped in SHIPPED_DATA[args.name].items()}
    existing = [str(target) for target in targets if os.path.lexists(target)]
    if existing:
        raise FileExistsError(
            f"{' and '.join(repr(path) for path in existing)} already "
            f"{'exists' if len(existing) == 1 else 'exist'}; not replacing: remove "
            f"{'it' if len(existing) == 1 else 'them'}, or give another DIR."
        )
    folder.mkdir(parents=True, exist_ok=True)
    for target in targets:  # a writable folder, a name it takes: before the first write
        check_output_path(target, what=f"the {args.name} data", kind="a new file", replaceable=lambda _: False)
    written = []
    for target, shipped in targets.items():
        args.pending_output = (f"the {args.name} data", target)
        rows = _write_decompressed(resources.files("gpusvm") / "data" / args.name / shipped, target)
        written.append(f"{target} ({rows:,} rows)")
    args.pending_output = None
    out(f"Wrote {' and '.join(written)}.")
    out(SHIPPED_DATA_ABOUT[args.name])
    return EXIT_OK


def _write_decompressed(source, target):
    """Write the gzip file ``source`` (a package resource) decompressed to ``target``,
    atomically; returns its number of lines (the data set's rows)."""
    lines = 0

    def write(handle):
        nonlocal lines
        with source.open("rb") as packed, gzip.GzipFile(fileobj=packed) as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                handle.write(block)
                lines += block.count(b"\n")

    write_atomically(target, write)
    return lines


COMMANDS = {
    "train": train_command,
    "predict": predict_command,
    "info": info_command,
    "demo": demo_command,
    "data": data_command,
}


def main(argv=None, out=print):
    """Run the command line; returns the exit code.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).
    out : callable
        Where report lines go (standard output).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    args = None
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as done:  # --help or --version, printed: argparse's status (0)
            return done.code
        if args.command is None:  # a bare gpusvm: the usage and the commands, and a usage status
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        return COMMANDS[args.command](args, out)
    except UsageError as error:
        print(f"{error.prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(_interrupted(args), file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        if debug:
            raise
        print(f"gpusvm: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_FAILURE


def _interrupted(args):
    """The line an interrupt (Ctrl-C) ends the command with: what it was about to write, and where."""
    prog = f"gpusvm {args.command}" if args is not None else "gpusvm"
    pending = getattr(args, "pending_output", None)
    if pending is None:
        return f"{prog}: interrupted."
    what, path = pending
    return f"{prog}: interrupted before writing {what}; {str(path)!r} is left as it was."


def _one_line(error):
    if isinstance(error, OSError) and error.filename is not None and error.strerror:  # "[Errno 13] ...: 'x'"
        return f"{str(error.filename)!r}: {error.strerror}."
    lines = str(error).strip().splitlines() or [type(error).__name__]
    more = " (--debug shows more)" if len(lines) > 1 else ""
    return lines[0] + more
