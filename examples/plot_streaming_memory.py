"""
Streaming a file larger than memory: the memory bound
=====================================================

``fit_chunks`` trains the linear and online estimators from a stream of ``(X, y)``
chunks, and :class:`gpusvm.data_files.SvmlightChunks` reads an svmlight file
``chunk_rows`` lines at a time, so that memory is bounded by a chunk, not by the file.
This example writes a small svmlight file (24,000 rows of 20 nonzeros in 2^16 columns,
about 4 MiB), trains :class:`gpusvm.FTRLClassifier` on it twice, and measures the
peak memory:

* whole: the file loaded into one CSR matrix, then ``fit``;
* streamed: ``fit_chunks`` over chunks of 2,000 rows, the peak measured chunk by chunk.

Both give the same model: streamed online learners visit the rows in the file's order,
carrying mini-batches across chunk boundaries, exactly as ``fit`` with
``shuffle=False`` does.

Memory is measured with :mod:`tracemalloc`, which sees the allocations of NumPy, SciPy
and scikit-learn's svmlight reader, and so the example asks for that reader
(``parser='scikit-learn'``): pyarrow's faster parser allocates from its own memory pool,
which tracemalloc does not see. Tracing every allocation slows the parsing down, which
is why the file is small here; the bound is the same on a file of any size (a test
checks the peak on a file 16 times larger).
"""

import tempfile
import tracemalloc
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from gpusvm import FTRLClassifier
from gpusvm.data_files import SvmlightChunks

# %%
# A generated svmlight file
# -------------------------
# Labels come from a sparse true model, so that there is something to learn.

rng = np.random.default_rng(0)
n_rows, n_features, nonzeros_per_row = 24_000, 2**16, 20
columns = rng.integers(0, n_features, size=(n_rows, nonzeros_per_row))
X = sp.csr_matrix(
    (
        np.ones(n_rows * nonzeros_per_row),
        columns.ravel(),
        np.arange(0, n_rows * nonzeros_per_row + 1, nonzeros_per_row),
    ),
    shape=(n_rows, n_features),
)
X.sum_duplicates()
true_weights = rng.normal(size=n_features) * (rng.random(n_features) < 0.1)
y = np.where(X @ true_weights + 0.5 * rng.normal(size=n_rows) > 0, 1, -1)

folder = tempfile.TemporaryDirectory()
path = Path(folder.name) / "stream.svm"
dump_svmlight_file(X, y, str(path), zero_based=True)
del X, y
file_mib = path.stat().st_size / 2**20
print(f"{path.name}: {file_mib:.1f} MiB, {n_rows:,} rows")

# %%
# The whole file at once
# ----------------------

tracemalloc.start()
X, y = load_svmlight_file(path, n_features=n_features, zero_based=True)
whole = FTRLClassifier(l1=1.0, batch_size=256, max_iter=1, shuffle=False, backend="numpy").fit(X, y)
whole_peak = tracemalloc.get_traced_memory()[1] / 2**20
tracemalloc.stop()
del X, y
print(f"whole file: peak {whole_peak:.1f} MiB")

# %%
# Streamed, chunk by chunk
# ------------------------
# A generator between the reader and ``fit_chunks`` records the peak after each chunk
# has been read and trained on, then resets it. Giving ``n_features`` and
# ``zero_based`` spares the reader a first scan of the file, and ``classes`` spares
# ``fit_chunks`` a pass to find them.


def measured(chunks, peaks):
    """The chunks, unchanged; the peak memory of reading and training each, in ``peaks``."""
    for chunk in chunks:
        yield chunk
        peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.reset_peak()


chunks = SvmlightChunks(path, chunk_rows=2_000, n_features=n_features, zero_based=True, parser="scikit-learn")
chunk_peaks = []
tracemalloc.start()
streamed = FTRLClassifier(l1=1.0, batch_size=256, max_iter=1, backend="numpy")
streamed.fit_chunks(measured(chunks, chunk_peaks), classes=[-1, 1])
tracemalloc.stop()
print(f"streamed: peak {max(chunk_peaks):.1f} MiB over {len(chunk_peaks)} chunks")
print("the same model:", np.allclose(streamed.coef_, whole.coef_, rtol=1e-12, atol=0))
folder.cleanup()

# %%
# The figure
# ----------
# The model's own state (FTRL keeps two float64 numbers per weight, here 2^16 of them)
# is part of both peaks; the rest of the streamed peak is one chunk's worth.

fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(
    np.arange(1, len(chunk_peaks) + 1), chunk_peaks, "o-", label="streamed: peak while reading and training each chunk"
)
ax.axhline(whole_peak, color="C1", linestyle="--", label="whole file loaded, then fit")
ax.axhline(file_mib, color="0.5", linestyle=":", label="size of the file")
ax.set_ylim(0, 1.15 * max(whole_peak, file_mib))
ax.set_xlabel("chunk (2,000 rows)")
ax.set_ylabel("peak traced memory (MiB)")
ax.set_title("FTRLClassifier.fit_chunks over an svmlight file")
ax.legend(loc="center right", fontsize="small")
fig.tight_layout()
plt.show()
