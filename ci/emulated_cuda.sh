#!/usr/bin/env bash
# The CuPy code paths on a CPU, through ../shared/tools/cuda-emu (a NumPy stand-in for
# CuPy; the CUDA kernels compiled with g++ under an emulation of CUDA's execution model):
# a subset of the CuPy tests that launches every file in kernels/, in about 20 minutes on
# 2 cores. It checks indexing, barriers, warp operations and agreement with the NumPy
# path, not speed (see the tool's README). .ci/run calls it when the tool is there.
#
# Not in the subset: streamed PegasosSVC's CuPy tests, which take minutes each here
# (hundreds of emulated steps); its launcher is the one test_pegasos.py runs, and
# streaming adds no kernel. SBPClassifier's whole fits on CuPy (test_sbp.py
# "models_agree") take about 10 minutes each.
# Usage: ci/emulated_cuda.sh [path to cuda-emu] [extra pytest arguments]
# With the tool's variants, pass -s: e.g. EMU_SAN=asan EMU_BLOCK_ORDER=shuffle
# ci/emulated_cuda.sh ../shared/tools/cuda-emu -s. A sanitizer's report does not fail
# the test, and pytest would keep a passing test's output to itself.
set -euo pipefail
cd "$(dirname "$0")/.."
emu=${1:-../shared/tools/cuda-emu}
shift || true
if [ ! -x "$emu/run" ]; then
  echo "ci/emulated_cuda.sh: no CUDA emulator at $emu; skipped"
  exit 0
fi
export EMU_BUILD="${EMU_BUILD:-$(mktemp -d)}"
subset=(  # every kernel file, each solver's launcher, both dtypes, dense and sparse
  "tests/test_emulated_device.py"                                                    # the stand-in refuses as CuPy does
  "tests/test_step_blocks.py"                                                        # graphs by default, direct here
  "tests/test_random.py::test_cupy_stream_matches_numpy"                             # random.cu, common.cuh
  "tests/test_water_level.py::test_gpu_radix_select_on_spread_and_clustered_values"   # water_level.cu
  "tests/test_water_level.py::test_gpu_bias_version_agrees_with_oracle"              # sbp_level.cu
  "tests/test_water_level.py::test_device_levels_of_many_problems_follow_drifting_responses[3.0-True]"
  "tests/test_water_level.py::test_device_levels_read_each_problems_own_rows_and_skip_stopped_ones[True]"
  "tests/test_water_level.py::test_device_levels_sort_windows_of_every_width[True]"  # windows near LEVEL_WINDOW
  "tests/test_kernel_functions.py::test_kernel_block_matches_scikit_learn"            # kernel_functions.cu
  "tests/test_kernel_functions.py::test_device_matrix_rows_of_a_csr_x_are_dense_products_where_it_is_dense_enough"
  "tests/test_reliability.py::test_sparse_inner_products_match_dense_ones"            # wide sparse products
  "tests/test_pegasos.py::test_matches_reference[cupy-True-True-7-3]"                 # pegasos.cu
  "tests/test_pegasos.py::test_no_intercept_matches_reference[cupy]"
  "tests/test_pegasos.py::test_sparse_rows_without_nonzeros[cupy]"
  "tests/test_pegasos.py::test_steps_on_given_rows_match_drawn_steps[cupy-True]"      # gpusvm.dask's gathered rows
  "tests/test_pegasos.py::test_device_fused_steps_give_the_reference_and_the_direct_model[True-3-True-True-48-9-replay]"
  "tests/test_online_logistic.py::test_cupy_matches_numpy[2-float32-True-ftrl]"       # online_logistic.cu
  "tests/test_online_logistic.py::test_cupy_matches_numpy[3-float64-False-rda]"
  "tests/test_online_logistic.py::test_cupy_matches_numpy[2-float64-True-tg]"
  "tests/test_online_logistic.py::test_cupy_matches_numpy[3-float32-False-fobos]"
  "tests/test_sbp_solver.py::test_steps_match_plain_algorithm[cupy-rbf-True-2-4-True]"       # sbp.cu
  "tests/test_sbp_solver.py::test_steps_match_plain_algorithm[cupy-poly-False-2-1-True]"
  "tests/test_sbp_solver.py::test_steps_match_plain_algorithm[cupy-linear-True-3-4-True]"
  "tests/test_sbp_solver.py::test_steps_match_plain_algorithm[cupy-rbf-False-3-1-False]"      # one basin
  "tests/test_sbp_solver.py::test_steps_of_a_batch_past_the_staged_rows_match_plain_algorithm[cupy-False]"  # drawn rows unstaged
  "tests/test_sbp_solver.py::test_device_steps_in_blocks_match_the_plain_algorithm[replay-True-products]"  # sparse rows
  "tests/test_sbp_solver.py::test_device_steps_in_blocks_match_the_plain_algorithm[replay-False-cache]"  # device row cache
  "tests/test_row_cache.py::test_device_row_cache_computes_a_large_miss_in_products_of_bounded_memory"  # ... in bounded products
  "tests/test_sbp_solver.py::test_device_drawn_row_products_in_blocks_of_bounded_memory"  # drawn rows' products, bounded
  "tests/test_sbp_solver.py::test_device_draws_in_one_block_and_by_tiles_are_the_same_rows[True]"  # both draws
  "tests/test_sbp_solver.py::test_device_pair_steps_match_the_host_pairs[replay-True-matrix]"  # one-vs-one pairs together
  "tests/test_sbp_solver.py::test_device_pair_steps_match_the_host_pairs[replay-False-cache]"   # ... from a row cache
  "tests/test_sbp.py::test_default_models_agree_on_the_device_and_the_host_on_a_few_rows"  # float32 kernel values
  "tests/test_sbp.py::test_device_history_says_where_the_kernel_values_came_from"  # distinct rows counted
  "tests/test_kernel_pegasos.py::test_counts_match_reference[cupy-3-4]"                # kernel_pegasos.cu
  "tests/test_kernel_pegasos.py::test_device_steps_in_blocks_give_the_host_model[replay-0-True]"  # computed rows, sparse
  "tests/test_kernel_pegasos.py::test_device_csr_input_with_64_bit_indices_gives_the_host_model"  # int32 indices
  "tests/test_streaming.py::test_online_streamed_fit_equals_fit_without_shuffle_and_partial_fit[cupy-2-FTRLClassifier]"
  "tests/test_streaming.py::test_kernel_solvers_check_device_memory_before_training[cupy-SBPClassifier]"
  "tests/test_dask.py::test_stacking_a_shard_empties_its_blocks"                      # gpusvm.dask shards on the device
  "tests/test_auto_nu.py::test_auto_nu_is_the_same_on_both_backends[cupy]"          # nu='auto': the pilot on the host, the same nu
  "tests/test_kernel_precision.py::test_sbp_models_agree_on_both_backends_on_shifted_rows[cupy]"  # centred float32 rows
  "tests/test_deformed_mnist.py::test_device_rows_under_the_cuda_emulator_with_scipy_standing_in_for_cupyx_ndimage"  # make_deformed_mnist on the device; SciPy stands in for cupyx.scipy.ndimage
)
# what the stand-in lacks (device memory to ask about, streams, events, pinned memory, CuPy's
# refusals of host arrays and of device arrays stored into host ones, device results of
# sparse products), in the test's child processes too: ci/emulated_device.py
export PYTHONPATH="$PWD/ci${PYTHONPATH:+:$PYTHONPATH}"
# -k keeps the CuPy cases of tests parametrized over both backends (the device-only tests
# are named test_device_* or test_gpu_*)
timeout 2100 "$emu/run" python -m pytest -q -p no:cacheprovider -p emulated_device -k "cupy or gpu or device" \
  "${subset[@]}" "$@"
