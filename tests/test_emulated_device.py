"""ci/emulated_device.py: the CPU stand-in for CuPy refuses host arrays where CuPy does.

Runs only under ../shared/tools/cuda-emu with the plugin (ci/emulated_cuda.sh); a real
CuPy raises the same errors on its own, and without CuPy there is nothing to check.
"""

import numpy as np
import pytest
import scipy.sparse as sp

cupy = pytest.importorskip("cupy")
if not cupy.__version__.endswith("emulated"):
    pytest.skip("checks the CPU stand-in for CuPy (ci/emulated_cuda.sh)", allow_module_level=True)


@pytest.mark.parametrize(
    "operation",
    [
        lambda device, host: device + host,
        lambda device, host: host * device,
        lambda device, host: cupy.concatenate([device, host]),
        lambda device, host: np.concatenate([device, host]),
        lambda device, host: cupy.ascontiguousarray(host),
        lambda device, host: np.asarray(device),
        lambda device, host: device.set(host.astype(np.float32)),
    ],
    ids=[
        "device+host",
        "host*device",
        "cupy.concatenate",
        "numpy.concatenate",
        "ascontiguousarray",
        "numpy.asarray",
        "set-other-dtype",
    ],
)
def test_device_mixing_host_arrays_is_refused_as_by_cupy(operation):
    with pytest.raises(TypeError):
        operation(cupy.zeros(4), np.ones(4))


def test_host_array_into_a_device_slice_is_refused_and_set_copies_it():
    device = cupy.zeros(4)
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray"):
        device[:2] = np.ones(2)
    device[np.array([0, 1])] = np.array([5.0, 6.0])  # an array index: CuPy converts the value
    device[1:3].set(np.array([7.0, 8.0]))
    np.testing.assert_array_equal(device.get(), [5.0, 7.0, 8.0, 0.0])


def test_device_sparse_products_are_device_arrays():
    import cupyx.scipy.sparse

    X = cupyx.scipy.sparse.csr_matrix(sp.random(5, 3, density=0.5, format="csr", random_state=0))
    dense = cupy.asarray(np.arange(6.0).reshape(3, 2))
    assert isinstance(X @ dense, cupy.ndarray)
    assert isinstance(X.toarray(), cupy.ndarray)
    with pytest.raises(TypeError):
        X @ np.ones((3, 2))
    assert not sp.issparse(X) and cupyx.scipy.sparse.issparse(X)  # as for cupyx's matrices


def test_device_array_stored_into_a_host_array_is_refused_in_gpusvm_modules():
    import gpusvm.svm

    store = gpusvm.svm.__emu_store__  # gpusvm's modules are compiled with their stores checked
    host = np.zeros((2, 3))
    for index in (slice(None), 0, (0, slice(1, 3))):
        with pytest.raises(TypeError, match="Implicit conversion"):
            store(host, index, cupy.ones(host[index].shape))
    store(host, (0, 1), cupy.asarray(5.0))  # one element from a 0-d array: NumPy takes float()
    store(host, slice(None), np.ones(3))
    store(host, (1, 2), 7.0)
    np.testing.assert_array_equal(host, [[1.0, 1.0, 1.0], [1.0, 1.0, 7.0]])


def test_the_rewritten_stores_keep_their_indexes_and_python_order():
    import ast

    import emulated_device

    source = """
order = []
def value(v):
    order.append("value")
    return v
def target():
    order.append("target")
    return host
host = np.zeros((3, 4))
target()[1:, ::2] = value(np.ones((2, 2)))
target()[0, ...] = value(2.0)
"""
    tree = ast.fix_missing_locations(emulated_device._StoreChecks().visit(ast.parse(source)))
    names = {"np": np, "__emu_store__": emulated_device._store}
    exec(compile(tree, "<rewritten>", "exec"), names)  # noqa: S102 (the rewritten source above)
    assert names["order"] == ["value", "target"] * 2
    np.testing.assert_array_equal(names["host"], [[2, 2, 2, 2], [1, 0, 1, 0], [1, 0, 1, 0]])


def test_a_child_process_completes_the_stand_in_when_it_imports_cupy():
    import subprocess
    import sys

    code = """
import sys
import gpusvm
print("cupy" in sys.modules)
import cupy, numpy as np
try:
    np.asarray(cupy.zeros(2))
except TypeError as error:
    print("Implicit conversion" in str(error))
"""
    # the plugin put ci/emulated_children (its sitecustomize) on the children's PYTHONPATH
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
