"""P2P shuffle and rechunk through the Go scheduler, with stock Clients and
stock `dask worker`s on dask's default config: dataframe shuffles and large
rechunks choose P2P by themselves whenever a Client exists. Every test checks
that the graph really holds a P2P barrier, compares the result with pandas or
numpy, and (where it matters) that the workers saw the scheduler's
shuffle-fail cleanup or a restarted run."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pandas as pd
import pytest
from distributed import Client

from cluster import GoScheduler, Workers, running_cluster, wait_for

pytestmark = pytest.mark.timeout(180)

BARRIER = "shuffle-barrier-"


@pytest.fixture(scope="module")
def p2p_cluster(tmp_path_factory):
    """The Go scheduler and two stock workers (with nannies), default config."""
    tmp = tmp_path_factory.mktemp("p2p")

    def start(sched, workers):
        workers.start(sched.address, "p1")
        workers.start(sched.address, "p2")

    with running_cluster(tmp, start, 2) as sched:
        yield sched


@pytest.fixture
def client(p2p_cluster):
    with Client(p2p_cluster.address, timeout=30) as c:
        yield c


def barrier_ids(collection) -> set[str]:
    """The shuffle ids of the P2P barriers in the graph dask builds for
    collection with the current (default) config and Client."""
    return {
        k[len(BARRIER):]
        for k in collection.__dask_graph__()
        if isinstance(k, str) and k.startswith(BARRIER)
    }


def _stale_runs(dask_worker):
    # shuffle id -> highest run id the scheduler failed (shuffle-fail) here
    return dict(dask_worker.plugins["shuffle"].shuffle_runs._stale_run_ids)


def failed_runs(client) -> dict[str, int]:
    out: dict[str, int] = {}
    for runs in client.run(_stale_runs).values():
        for sid, run_id in runs.items():
            out[sid] = max(out.get(sid, 0), run_id)
    return out


def assert_cleaned_up(client, before: set[str], n: int):
    """A finished shuffle ends with shuffle-fail from the scheduler (its
    barrier was released): the workers drop the run's buffers and files.
    n shuffles that were not in before must have ended so."""
    wait_for(lambda: len(set(failed_runs(client)) - before) >= n, 30, f"shuffle-fail for {n} shuffle(s)")


def frames():
    rng = np.random.default_rng(7)
    pdf = pd.DataFrame(
        {"k": rng.integers(0, 40, 1200), "v": rng.random(1200), "u": rng.permutation(1200)}
    )
    other = pd.DataFrame({"k": np.arange(40), "w": np.arange(40) * 10})
    return pdf, other


def test_dataframe_merge_p2p(client):
    import dask.dataframe as dd

    pdf, other = frames()
    merged = dd.from_pandas(pdf, npartitions=6).merge(dd.from_pandas(other, npartitions=3), on="k")
    ids = barrier_ids(merged)
    assert len(ids) == 2, "a hash join shuffles both sides"
    before = set(failed_runs(client))
    got = merged.compute().sort_values(["k", "u"]).reset_index(drop=True)
    want = pdf.merge(other, on="k").sort_values(["k", "u"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)
    assert_cleaned_up(client, before, len(ids))


def test_dataframe_shuffle_on_column_p2p(client):
    import dask.dataframe as dd

    pdf, _ = frames()
    shuffled = dd.from_pandas(pdf, npartitions=6).shuffle(on="k")
    ids = barrier_ids(shuffled)
    assert len(ids) == 1
    before = set(failed_runs(client))
    parts = client.compute(shuffled.to_delayed())
    parts = client.gather(parts)
    got = pd.concat(parts).sort_values("u").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, pdf.sort_values("u").reset_index(drop=True))
    owners = [set(p.k) for p in parts]
    for i, a in enumerate(owners):
        for b in owners[i + 1:]:
            assert not a & b, "each key lives in exactly one output partition"
    assert_cleaned_up(client, before, len(ids))


def test_dataframe_set_index_unsorted_p2p(client):
    import dask.dataframe as dd

    pdf, _ = frames()
    indexed = dd.from_pandas(pdf, npartitions=6).set_index("u")
    assert barrier_ids(indexed)
    pd.testing.assert_frame_equal(indexed.compute(), pdf.set_index("u").sort_index())


def test_dataframe_groupby_split_out_p2p(client):
    import dask.dataframe as dd

    pdf, _ = frames()
    agg = dd.from_pandas(pdf, npartitions=6).groupby("k").v.sum(split_out=3)
    assert barrier_ids(agg)
    pd.testing.assert_series_equal(agg.compute().sort_index(), pdf.groupby("k").v.sum())


def test_array_rechunk_rows_to_columns_p2p(client):
    import dask.array as da

    data = np.arange(400 * 400, dtype=float).reshape(400, 400)
    x = da.from_array(data, chunks=(40, 400)) + 1
    y = x.rechunk((400, 40))
    ids = barrier_ids(y)
    assert len(ids) == 1, "a 10x10 all-to-all rechunk goes through P2P"
    before = set(failed_runs(client))
    assert y.chunks == ((400,), (40,) * 10)
    np.testing.assert_array_equal(y.compute(), data + 1)
    assert_cleaned_up(client, before, len(ids))


def slow_partition(df):
    time.sleep(0.4)
    return df


def _active_runs(dask_worker):
    return len(dask_worker.plugins["shuffle"].shuffle_runs._active_runs)


def test_worker_sigkilled_during_p2p_shuffle(tmp_path):
    """A participant dies mid-shuffle: the scheduler fails the run on the
    others, restarts the shuffle on the survivors, and the result is right."""
    import dask.dataframe as dd

    sched = GoScheduler(tmp_path)
    workers = Workers(tmp_path)
    try:
        sched.start()
        for name in ("n1", "n2", "n3"):
            workers.start(sched.address, name, "--no-nanny")
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(3, timeout=60)
            pdf, _ = frames()
            ddf = dd.from_pandas(pdf, npartitions=12).map_partitions(slow_partition, meta=pdf.head(0))
            shuffled = ddf.shuffle(on="k")
            assert len(barrier_ids(shuffled)) == 1
            fut = c.compute(shuffled)
            wait_for(lambda: any(c.run(_active_runs).values()), 60, "a P2P run on the workers")
            pids = c.run(os.getpid)
            victim = sorted(pids)[0]
            os.kill(pids[victim], signal.SIGKILL)
            got = fut.result(timeout=120)
            pd.testing.assert_frame_equal(
                got.sort_values("u").reset_index(drop=True), pdf.sort_values("u").reset_index(drop=True)
            )
            assert len(c.nthreads()) == 2
            # run 1 was failed by the worker's death; a later run finished
            wait_for(lambda: max(failed_runs(c).values(), default=0) >= 2, 30, "the restarted run's cleanup")
    finally:
        workers.stop()
        sched.stop()
