"""The active memory manager (ReduceReplicas, on by default as in
distributed) with stock Clients and stock `dask worker`s against the Go
scheduler: a replica a worker fetched for a task that has finished is
dropped from that worker, and the data stays reachable."""

from __future__ import annotations

import time

import pytest
from distributed import Client, wait

from cluster import running_cluster, scheduler_workers, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    def two_workers(sched, workers):
        workers.start(sched.address, "w1")
        workers.start(sched.address, "w2")

    # A short interval keeps the test quick; start is left at its default.
    env = {"DASK_DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__INTERVAL": "200ms"}
    with running_cluster(tmp_path_factory.mktemp("amm"), two_workers, 2, env=env) as sched:
        with Client(sched.address, timeout=30) as c:
            yield c


def make(n):
    return bytes(n)


def size(b):
    return len(b)


def test_amm_drops_fetched_replica_no_waiter_needs(client):
    w1, w2 = sorted(scheduler_workers(client))
    x = client.submit(make, 1_000_000, key="amm-x", workers=[w1])
    y = client.submit(size, x, key="amm-y", workers=[w2])
    assert y.result() == 1_000_000
    # w2 fetched x for y; y is done, so no waiter needs that copy.
    holders = wait_for(lambda: (h := client.who_has([x])["amm-x"]) and len(h) == 1 and h,
                       10, "the fetched replica of amm-x dropped")
    # w2 holds x and y, so it has the more memory and drops its replica.
    assert list(holders) == [w1]
    # The workers really let it go, and the kept copy serves the data.
    held = client.run(lambda dask_worker: "amm-x" in dask_worker.data)
    assert held == {w1: True, w2: False}
    assert len(x.result()) == 1_000_000
    z = client.submit(size, x, key="amm-z", workers=[w2])
    assert z.result() == 1_000_000


def slow(b, t):
    time.sleep(t)
    return len(b)


def test_amm_keeps_replicas_waiters_need(client):
    w1, w2 = sorted(scheduler_workers(client))
    x = client.submit(make, 1000, key="amm-k", workers=[w1])
    wait(x)
    # A waiter processing on each worker: w2 fetches x for b, and both
    # replicas are needed while a and b run.
    a = client.submit(slow, x, 2.0, key="amm-a", workers=[w1])
    b = client.submit(slow, x, 2.0, key="amm-b", workers=[w2])
    wait_for(lambda: len(client.who_has([x])["amm-k"]) == 2, 10, "w2 fetched amm-k for amm-b")
    time.sleep(1.0)  # five AMM cycles while both still run
    assert sorted(client.who_has([x])["amm-k"]) == [w1, w2]
    assert a.result() == b.result() == 1000
    wait_for(lambda: len(client.who_has([x])["amm-k"]) == 1, 10, "a replica of amm-k dropped after its waiters")
