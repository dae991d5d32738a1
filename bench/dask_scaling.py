"""gpusvm.dask on one machine: round-trip costs, time and memory against the number of
workers, and a data set larger than one worker's memory limit trained across workers.

1. Rounds: the latency of one round through each channel dask.distributed offers (an
   actor call to every worker, a task on every worker, a task chained on the previous
   one), with thread and process workers. These decided the designs in gpusvm.dask
   (a round per block of steps, never per step).
2. Scaling: PegasosSVC (mode 'exact' and 'average') and FTRLClassifier on Adult (the
   shipped UCI data, CSR; Pegasos to its default stopping rule, FTRL 5 epochs; and
   SBPClassifier, 2 epochs at its defaults, Adult only: a kernel step on 1M rows is
   beyond this machine's budget) and on
   1M rows of the hashed click-log stream (2^20 columns, generated on the workers,
   chunk by chunk; 3 epochs of each), with 1 and 2 worker processes; the single-node
   estimator on the same data beside them. Time of ``fit``, the exact objective
   (Pegasos) or test log loss (FTRL), and the peak resident memory during the fit (of
   the process for single-node, of the largest worker otherwise; sampled every 10 ms).
3. Capacity: FTRLClassifier and exact PegasosSVC (one epoch each) on 8M hashed-stream
   rows whose CSR size exceeds one worker's ``memory_limit``, across three workers that
   each hold a third.

    python -m bench.dask_scaling [--quick] [--parts rounds,scaling,capacity]
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np

from bench.common import report
from bench.datasets import HashedStream


class _Echo:
    def ping(self, value):
        return value


def _ping(value):
    return value


class PeakMemory:
    """The peak resident memory of this process from :meth:`start` to :meth:`stop`,
    sampled every 10 ms by a thread (``ru_maxrss`` would include what a worker process
    inherited from the one that started it, and never resets)."""

    def __init__(self):
        self.peak, self._running, self._thread = 0, False, None

    def start(self):
        import psutil

        process = psutil.Process()
        self.peak, self._running = process.memory_info().rss, True

        def sample():
            while self._running:
                self.peak = max(self.peak, process.memory_info().rss)
                time.sleep(0.01)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._running = False
        self._thread.join()
        return self.peak


def _start_peak_memory(dask_worker):
    dask_worker.gpusvm_peak_memory = PeakMemory().start()


def _stop_peak_memory(dask_worker):
    return dask_worker.gpusvm_peak_memory.stop()


def rounds(repeats):
    """Milliseconds per round of each channel, with thread and with process workers."""
    from distributed import Client, LocalCluster

    rows = []
    for processes in (False, True):
        with (
            LocalCluster(n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):
            workers = sorted(client.nthreads())
            actors = [client.submit(_Echo, workers=[w], actor=True).result() for w in workers]
            for actor in actors:
                actor.ping(0).result()
            started = time.perf_counter()
            for i in range(repeats):
                [future.result() for future in [actor.ping(i) for actor in actors]]
            actor_ms = (time.perf_counter() - started) / repeats * 1e3
            started = time.perf_counter()
            for i in range(repeats):
                client.gather([client.submit(_ping, i, workers=[w], pure=False) for w in workers])
            task_ms = (time.perf_counter() - started) / repeats * 1e3
            started = time.perf_counter()
            future = client.submit(_ping, 0, pure=False)
            for i in range(repeats):
                future = client.submit(_ping, future, pure=False)
            future.result()
            chain_ms = (time.perf_counter() - started) / repeats * 1e3
        rows.append(
            {
                "workers": "processes" if processes else "threads",
                "actor_ms": actor_ms,
                "task_ms": task_ms,
                "chained_ms": chain_ms,
            }
        )
    return rows


def hashed_collections(n_rows, chunk_rows, n_features):
    """The hashed stream as dask arrays whose chunks are generated on the workers."""
    import dask
    import dask.array as da

    stream = HashedStream(n_rows, chunk_rows=chunk_rows, n_features=n_features, n_fields=40, seed=0)
    sizes = [min(chunk_rows, n_rows - i * chunk_rows) for i in range(stream.n_chunks)]
    chunk = dask.delayed(stream.chunk, nout=2, pure=True)
    pairs = [chunk(i) for i in range(stream.n_chunks)]
    import scipy.sparse as sp

    meta = sp.csr_matrix((0, n_features), dtype=np.float32)
    X = da.concatenate(
        [da.from_delayed(p[0], shape=(size, n_features), dtype=np.float32, meta=meta) for p, size in zip(pairs, sizes)]
    )
    y = da.concatenate([da.from_delayed(p[1], shape=(size,), dtype=np.int64) for p, size in zip(pairs, sizes)])
    test = stream.chunk(stream.n_chunks)  # fresh rows past the stream's end
    return X, y, test, stream


def scaling(quick):
    import dask.array as da
    import gpusvm
    import gpusvm.dask as gd
    from distributed import Client, LocalCluster
    from gpusvm.datasets import load_adult
    from sklearn.metrics import log_loss

    X, y, X_test, y_test = load_adult()
    hashed_rows = 100_000 if quick else 1_000_000
    data = {
        "adult": (
            lambda: (da.from_array(X, chunks=(8_200, X.shape[1]), asarray=False), da.from_array(y, chunks=8_200)),
            (X, y),
            (X_test, y_test),
        ),
    }
    hX, hy, (htX, hty), stream = hashed_collections(hashed_rows, 50_000, 2**20)
    local_hashed = None

    def models(dataset):
        """Adult: Pegasos to its default stopping rule; the hashed rows: 3 epochs of each."""
        pegasos = dict(random_state=0, backend="numpy", **({"max_iter": 3, "tol": None} if dataset == "hashed" else {}))
        online = dict(random_state=0, backend="numpy", max_iter=3 if dataset == "hashed" else 5)
        sbp = dict(random_state=0, backend="numpy", max_iter=2)
        return {
            "PegasosSVC exact": (lambda: gd.PegasosSVC(**pegasos), lambda: gpusvm.PegasosSVC(**pegasos)),
            "PegasosSVC average": (lambda: gd.PegasosSVC(mode="average", **pegasos), None),
            "FTRLClassifier": (lambda: gd.FTRLClassifier(**online), lambda: gpusvm.FTRLClassifier(**online)),
        } | (
            {"SBPClassifier": (lambda: gd.SBPClassifier(**sbp), lambda: gpusvm.SBPClassifier(**sbp))}
            if dataset == "adult"
            else {}
        )

    rows = []
    for dataset in ("adult", "hashed"):
        if dataset == "hashed":
            local_hashed = local_hashed or _stack(stream)
            in_memory, test = local_hashed, (htX, hty)
        else:
            in_memory, test = data[dataset][1], data[dataset][2]
        for name, (make, make_local) in models(dataset).items():
            if make_local is not None:
                model, memory = make_local(), PeakMemory().start()
                started = time.perf_counter()
                model.fit(*in_memory)
                seconds = time.perf_counter() - started
                rows.append(_row(dataset, name, "single node", seconds, model, test, memory.stop(), log_loss))
            for n_workers in (1, 2):
                with (
                    LocalCluster(
                        n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None
                    ) as cluster,
                    Client(cluster) as client,
                ):
                    dX, dy = data[dataset][0]() if dataset == "adult" else (hX, hy)
                    dX, dy = client.persist([dX, dy])
                    client.gather([client.submit(lambda block: block.shape[0], f) for f in _futures(dX)])
                    model = make()
                    client.run(_start_peak_memory)
                    started = time.perf_counter()
                    model.fit(dX, dy)
                    seconds = time.perf_counter() - started
                    peak = max(client.run(_stop_peak_memory).values())
                    rows.append(
                        _row(
                            dataset,
                            name,
                            f"{n_workers} worker{'s' * (n_workers > 1)}",
                            seconds,
                            model,
                            test,
                            peak,
                            log_loss,
                        )
                    )
                    print(rows[-1], flush=True)
    return rows


def _futures(array):
    from distributed import futures_of

    return futures_of(array)


def _stack(stream):
    import scipy.sparse as sp

    chunks = [stream.chunk(i) for i in range(stream.n_chunks)]
    return sp.vstack([c[0] for c in chunks], format="csr"), np.concatenate([c[1] for c in chunks])


def _row(dataset, name, where, seconds, model, test, peak, log_loss):
    X_test, y_test = test
    row = {
        "dataset": dataset,
        "model": name,
        "where": where,
        "seconds": seconds,
        "accuracy": float(model.score(X_test, y_test)),
        "peak_rss_mib": peak / 2**20,
    }
    if hasattr(model, "objective_curve_") and model.objective_curve_:
        row["objective"] = model.objective_curve_[-1]
        row["epochs"] = model.n_iter_
    if hasattr(model, "water_level_"):  # SBP: the level (margin) of the averaged model, higher is better
        row["objective"] = float(np.mean(model.water_level_))
        row["epochs"] = model.n_iter_
        row["support_vectors"] = int(model.support_.size)
    if hasattr(model, "predict_proba"):
        row["test_log_loss"] = float(log_loss(y_test, model.predict_proba(X_test)))
    return row


def capacity(quick):
    """FTRL and exact Pegasos (one epoch each) on more rows than one worker's memory
    limit holds, across three workers (each holds a third; none spills to disk or pauses
    before 95% of its limit; a worker process starts at about 0.4 GiB). The rows are
    generated on the workers, chunk by chunk, and not persisted first: the shards are
    their only copy."""
    import dask
    import gpusvm.dask as gd
    from distributed import Client, LocalCluster

    n_rows = 200_000 if quick else 8_000_000
    limit = "1GiB" if quick else "2GiB"  # quick: a smoke run only, the data fit one worker
    X, y, (X_test, y_test), _ = hashed_collections(n_rows, 100_000, 2**20)
    memory = {
        "distributed.worker.memory.target": False,
        "distributed.worker.memory.spill": False,
        "distributed.worker.memory.pause": 0.95,
    }
    first_chunk = hashed_collections(100_000, 100_000, 2**20)[3].chunk(0)[0]
    stored = _csr_bytes(first_chunk) * n_rows / first_chunk.shape[0]  # about: every chunk alike
    models = {
        "FTRLClassifier": lambda: gd.FTRLClassifier(random_state=0, max_iter=1, backend="numpy"),
        "PegasosSVC exact": lambda: gd.PegasosSVC(random_state=0, max_iter=1, tol=None, backend="numpy"),
    }
    results = []
    for name, make in models.items():
        result = {"model": name, "rows": n_rows, "worker_memory_limit": limit, "data_bytes": stored}
        with (
            dask.config.set(memory),
            LocalCluster(
                n_workers=3, threads_per_worker=1, processes=True, memory_limit=limit, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            model = make()
            client.run(_start_peak_memory)
            started = time.perf_counter()
            try:
                model.fit(X, y)
            except Exception as error:  # recorded, not hidden: what a user with these limits would see
                result.update(
                    error=f"{type(error).__name__}: {str(error)[:300]}", seconds=time.perf_counter() - started
                )
                results.append(result)
                continue
            seconds = time.perf_counter() - started
            peaks = sorted(client.run(_stop_peak_memory).values())
        result.update(
            seconds=seconds,
            rows_per_second=n_rows / seconds,
            worker_peak_rss_bytes=peaks,
            accuracy=float(model.score(X_test, y_test)),
        )
        print(result, flush=True)
        results.append(result)
    return results


def _csr_bytes(block):
    return int(block.data.nbytes + block.indices.nbytes + block.indptr.nbytes)


def _capacity_outcome(result):
    if "error" in result:
        return f"{result['model']} failed after {result['seconds']:.0f} s ({result['error'][:160]})"
    peaks = ", ".join(f"{p / 2**20:.0f}" for p in result["worker_peak_rss_bytes"])
    return (
        f"{result['model']} in {result['seconds']:.1f} s, worker peaks {peaks} MiB, accuracy {result['accuracy']:.4f}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--parts", default="rounds,scaling,capacity", help="comma-separated parts to run (default: all three)"
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    round_rows = rounds(20 if args.quick else 200) if "rounds" in parts else []
    scaling_rows = scaling(args.quick) if "scaling" in parts else []
    capacity_results = capacity(args.quick) if "capacity" in parts else []
    payload = {
        "dataset": "Adult (shipped) and the hashed click-log stream (bench/datasets.py's HashedStream, 2^20 columns)",
        "parameters": {"quick": args.quick, "note": "LocalCluster worker processes, 1 thread each, NumPy backend"},
        "rounds": round_rows,
        "capacity": capacity_results,
        "results": scaling_rows,
    }
    columns = [
        ("data", "dataset", "s"),
        ("model", "model", "s"),
        ("where", "where", "s"),
        ("fit s", "seconds", ".2f"),
        ("epochs", "epochs", "g"),
        ("objective", "objective", ".5f"),
        ("test log loss", "test_log_loss", ".4f"),
        ("accuracy", "accuracy", ".4f"),
        ("peak RSS during fit (largest worker), MiB", "peak_rss_mib", ".0f"),
    ]
    title = (
        "gpusvm.dask against single-node gpusvm on this machine (rounds: "
        + "; ".join(
            f"{r['workers']}: actor {r['actor_ms']:.1f} ms, task {r['task_ms']:.1f} ms, "
            f"chained task {r['chained_ms']:.1f} ms"
            for r in round_rows
        )
        + (
            f". Capacity: {capacity_results[0]['rows']:,} hashed rows, about "
            f"{capacity_results[0]['data_bytes'] / 2**20:.0f} MiB as CSR, on 3 workers limited to "
            f"{capacity_results[0]['worker_memory_limit']} each: "
            + "; ".join(_capacity_outcome(result) for result in capacity_results)
            if capacity_results
            else ""
        )
        + ")"
    )
    report("dask_scaling", ["numpy"], title=title, columns=columns, payload=payload)


if __name__ == "__main__":
    main()
