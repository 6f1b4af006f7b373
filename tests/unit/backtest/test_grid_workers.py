"""A grid's worker processes hold numpy's BLAS to one thread each: the workers keep every core
busy already, and BLAS threads waiting for work spin, taking a core from another worker."""

from __future__ import annotations

import multiprocessing

import numpy as np
from threadpoolctl import threadpool_info

from trader.backtest import grid_runner


def _blas_threads() -> list[int]:
    np.ones((64, 64)) @ np.ones((64, 64))  # BLAS loaded and used, as a run's scores use it
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_a_grid_worker_runs_blas_on_one_thread():
    context = multiprocessing.get_context("spawn")
    # Unless told, OpenBLAS runs a thread per core.
    with context.Pool(1, initializer=grid_runner._one_blas_thread) as worker:
        threads = worker.apply(_blas_threads)  # numpy's and scipy's, each its own
    assert threads
    assert set(threads) == {1}
