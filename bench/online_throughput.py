"""Online logistic regression throughput: FTRLClassifier beside river's FTRL and SGDClassifier(log_loss).

Two streams, each learned in one pass through ``partial_fit`` (river: ``learn_one``):

* Adult (the embedded copy, 32,561 rows, about 14 nonzeros per row), median of repeats;
* a synthetic hashed click stream (``bench/datasets.py``'s ``HashedStream``: 10 million rows by default, 20
  categorical fields hashed into 2**20 columns, labels drawn from a known logistic model),
  fed in chunks of 500,000 rows that every library receives in the same order. River, one
  example at a time in Python, learns from the first ``--river-rows`` rows only.

Timings cover the learning calls only (building the chunks, and river's per-row dicts, is
not counted). A cupy run includes copying each chunk to the device. Quality is checked on
held-out rows: test log loss and accuracy (for the synthetic stream beside the true
model's log loss, the floor). All FTRL runs share ``alpha=0.1, beta=1, l1=1, l2=1``;
river's intercept is learned by its own SGD (``intercept_lr=0.01``), gpusvm's by FTRL.

    python -m bench.online_throughput [--backends numpy cupy] [--stream-rows 10000000] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.linear_model import SGDClassifier

from bench.common import TimeLimit, markdown_table, median, write_results
from bench.datasets import HashedStream

from gpusvm import FTRLClassifier
from gpusvm.datasets import load_adult

FTRL = dict(alpha=0.1, beta=1.0, l1=1.0, l2=1.0)
SGD = dict(loss="log_loss", penalty="l2", alpha=1e-4, random_state=0)  # scikit-learn's defaults
CLASSES = np.array([0, 1])


def rows_as_dicts(X):
    """CSR rows as river's ``{feature: value}`` dicts."""
    X = X.tocsr()
    return [
        dict(
            zip(
                X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(),
                X.data[X.indptr[i] : X.indptr[i + 1]].tolist(),
                strict=True,
            )
        )
        for i in range(X.shape[0])
    ]


class RiverFTRL:
    """river's LogisticRegression with the FTRLProximal optimizer, behind a partial_fit face."""

    def __init__(self):
        from river import linear_model, optim

        self.model = linear_model.LogisticRegression(optimizer=optim.FTRLProximal(**FTRL))

    def partial_fit(self, rows, y, classes=None):
        for x, label in zip(rows, y, strict=True):
            self.model.learn_one(x, bool(label))
        return self

    def predict_proba(self, rows):
        positive = np.array([self.model.predict_proba_one(x).get(True, 0.0) for x in rows])
        return np.column_stack([1 - positive, positive])


def learners(backends, batch_sizes, with_river):
    """(name, backend, factory, input kind) rows; input kind 'dicts' is river's."""
    out = []
    for backend in backends:
        for batch in batch_sizes:
            out.append(
                (
                    f"gpusvm FTRLClassifier ({backend}, batch {batch})",
                    backend,
                    lambda b=backend, k=batch: FTRLClassifier(**FTRL, batch_size=k, backend=b),
                    "csr",
                )
            )
    out.append(("scikit-learn SGDClassifier (log_loss)", "numpy", lambda: SGDClassifier(**SGD), "csr"))
    if with_river:
        out.append(("river LogisticRegression (FTRLProximal)", "numpy", RiverFTRL, "dicts"))
    return out


def learn(model, X, y, backend):
    """Seconds for one ``partial_fit`` (synchronized on the GPU)."""
    start = time.perf_counter()
    model.partial_fit(X, y, classes=CLASSES)
    if backend == "cupy":
        import cupy

        cupy.cuda.Device().synchronize()
    return time.perf_counter() - start


def quality(model, X, y):
    probabilities = np.clip(np.asarray(model.predict_proba(X))[:, 1], 1e-15, 1 - 1e-15)
    loss = float(np.mean(-(y * np.log(probabilities) + (1 - y) * np.log(1 - probabilities))))
    return loss, float(np.mean((probabilities > 0.5) == y))


def adult_rows(entries, repeats):
    X, y, X_test, y_test = load_adult()
    y, y_test = (y == 1).astype(int), (y_test == 1).astype(int)
    dicts, test_dicts = rows_as_dicts(X), rows_as_dicts(X_test)
    rows = []
    for name, backend, make, kind in entries:
        data, test = (dicts, test_dicts) if kind == "dicts" else (X, X_test)
        seconds = []
        for _ in range(repeats):
            model = make()
            seconds.append(learn(model, data, y, backend))
        loss, accuracy = quality(model, test, y_test)
        rows.append(
            {
                "stream": "adult",
                "learner": name,
                "backend": backend,
                "rows": X.shape[0],
                "nonzeros": X.nnz,
                "seconds": median(seconds),
                "repeats_seconds": seconds,
                "test_log_loss": loss,
                "test_accuracy": accuracy,
            }
        )
    return rows


def stream_rows(entries, stream, river_rows, test_rows):
    """Each learner's rows, seconds and test quality on the hashed stream, and the true
    model's test log loss. A time limit (:class:`TimeLimit`) ends the pass early: each
    learner is then measured on the rows it learned, and ``time_limit.reached`` says so."""
    models = {name: make() for name, _, make, _ in entries}
    totals = {name: {"seconds": 0.0, "rows": 0, "nonzeros": 0} for name, *_ in entries}
    with TimeLimit() as time_limit:
        for index in range(stream.n_chunks):
            X, y = stream.chunk(index)
            for name, backend, _, kind in entries:
                limit = river_rows - totals[name]["rows"] if kind == "dicts" else X.shape[0]
                if limit <= 0:
                    continue
                part_X, part_y = X[:limit], y[:limit]
                data = rows_as_dicts(part_X) if kind == "dicts" else part_X
                totals[name]["seconds"] += learn(models[name], data, part_y, backend)
                totals[name]["rows"] += part_X.shape[0]
                totals[name]["nonzeros"] += part_X.nnz
            print(f"chunk {index + 1}/{stream.n_chunks}", flush=True)
    X_test, y_test = stream.chunk(stream.n_chunks)  # a chunk beyond the stream
    X_test, y_test = X_test[:test_rows], y_test[:test_rows]
    rows = []
    for name, backend, _, kind in entries:
        if not totals[name]["rows"]:  # the time limit came before its first chunk
            continue
        loss, accuracy = quality(models[name], rows_as_dicts(X_test) if kind == "dicts" else X_test, y_test)
        rows.append(
            {
                "stream": "hashed",
                "learner": name,
                "backend": backend,
                **totals[name],
                "test_log_loss": loss,
                "test_accuracy": accuracy,
                "nonzero_weights": int(getattr(models[name], "n_nonzero_", -1)),
            }
        )
    return rows, stream.bayes_log_loss(X_test, y_test), time_limit.reached


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=["numpy", "cupy"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[32, 1024])
    parser.add_argument("--stream-rows", type=int, default=10_000_000)
    parser.add_argument("--river-rows", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-river", action="store_true", help="leave river out (it is not on the GPU image)")
    parser.add_argument("--quick", action="store_true", help="a 100,000-row stream, one repeat (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.stream_rows, args.river_rows, args.repeats = min(args.stream_rows, 100_000), 5_000, 1
    with_river = not args.no_river
    if with_river:
        try:
            import river  # noqa: F401
        except ImportError:
            print("river is not installed: leaving it out (pip install river)")
            with_river = False
    entries = learners(args.backends, args.batch_sizes, with_river)
    if "cupy" in args.backends:  # warm-up: compile the kernels outside the timings
        X, y, _, _ = load_adult()
        FTRLClassifier(backend="cupy").partial_fit(X[:500], y[:500], classes=[-1, 1])
    rows = adult_rows(entries, args.repeats)
    stream = HashedStream(args.stream_rows, chunk_rows=min(500_000, args.stream_rows))
    hashed, floor, stopped = stream_rows(entries, stream, args.river_rows, test_rows=50_000)
    rows += hashed
    for row in rows:
        row["rows_per_second"] = row["rows"] / row["seconds"]
        row["nonzeros_per_second"] = row["nonzeros"] / row["seconds"]
    columns = [
        ("learner", "learner", "s"),
        ("rows learned", "rows", ",d"),
        ("seconds", "seconds", ".2f"),
        ("rows/s", "rows_per_second", ",.0f"),
        ("nonzeros/s", "nonzeros_per_second", ",.0f"),
        ("test log loss", "test_log_loss", ".4f"),
        ("test accuracy", "test_accuracy", ".4f"),
    ]
    table = [
        "## Online logistic regression throughput, one pass",
        "",
        f"### Adult ({rows[0]['rows']:,} rows, median of {args.repeats})",
        "",
        *markdown_table(columns, [r for r in rows if r["stream"] == "adult"]),
        "",
        f"### Hashed click stream ({args.stream_rows:,} rows, {stream.n_fields} fields in {stream.n_features:,} "
        f"hashed columns; true model's test log loss {floor:.4f})",
        "",
        *markdown_table(columns, hashed),
    ]
    payload = {
        "dataset": {
            "adult": "UCI Adult (a9a encoding), one pass",
            "hashed": {
                "rows": args.stream_rows,
                "fields": int(stream.n_fields),
                "n_features": stream.n_features,
                "chunk_rows": stream.chunk_rows,
                "true_model_test_log_loss": floor,
            },
        },
        "parameters": {
            "ftrl": FTRL,
            "sgd": SGD,
            "batch_sizes": args.batch_sizes,
            "river_rows": args.river_rows,
            "repeats": args.repeats,
            "quick": args.quick,
        },
        "results": rows,
        "stopped_at_time_limit": stopped,
    }
    paths = write_results("online_throughput", args.backends, payload, table)
    print("\n".join(table))
    print("wrote", *paths)


if __name__ == "__main__":
    main()
