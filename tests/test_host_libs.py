"""Unmodified libraries that put Python inside the scheduler, against the Go
scheduler with two stock workers: xgboost.dask.train (its _get_rabit_args
starts the RabitTracker with run_on_scheduler) and optuna_integration's
DaskStorage (the study's storage lives in a scheduler extension, reached
through about 25 optuna_* ops the extension adds to Scheduler.handlers)."""

from __future__ import annotations

import numpy as np
import pytest
from distributed import Client, wait

from cluster import two_worker_cluster

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_worker_cluster(tmp_path_factory.mktemp("host-libs"), nthreads=2) as sched:
        yield sched


def test_xgboost_dask_train(cluster):
    import dask.array as da
    import xgboost as xgb
    import xgboost.dask  # noqa: F401 - not imported by xgboost itself

    rng = np.random.default_rng(0)
    n, features = 4000, 5
    X = rng.normal(size=(n, features))
    coef = np.arange(1, features + 1, dtype=float)
    y = X @ coef + rng.normal(scale=0.01, size=n)
    with Client(cluster.address, timeout=60) as c:
        dX = da.from_array(X, chunks=(500, features)).persist()
        dy = da.from_array(y, chunks=(500,)).persist()
        wait([dX, dy])
        # the partitions on both workers, so that the training uses both
        holders = {w for ws in c.who_has(dX).values() for w in ws}
        assert len(holders) == 2, holders
        dtrain = xgb.dask.DaskDMatrix(c, dX, dy)
        out = xgb.dask.train(c, {"tree_method": "hist", "objective": "reg:squarederror", "max_depth": 4,
                                 "nthread": 1}, dtrain, num_boost_round=60, evals=[(dtrain, "train")])
        booster = out["booster"]
        rmse = out["history"]["train"]["rmse"]
        assert len(rmse) == 60 and rmse[-1] < rmse[0] / 5, rmse[::10]
        pred = xgb.dask.predict(c, booster, dX).compute()
        assert pred.shape == (n,)
        r2 = 1 - np.sum((pred - y) ** 2) / np.sum((y - y.mean()) ** 2)
        assert r2 > 0.9, r2
        # the tracker ran in the scheduler's host: a second training reuses it
        out2 = xgb.dask.train(c, {"tree_method": "hist", "nthread": 1}, dtrain, num_boost_round=5)
        assert out2["booster"].num_boosted_rounds() == 5


def test_optuna_dask_storage(cluster):
    import optuna
    from optuna_integration import DaskStorage

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial):
        x = trial.suggest_float("x", -10, 10)
        return (x - 2) ** 2

    with Client(cluster.address, timeout=60) as c:
        storage = DaskStorage()
        study = optuna.create_study(storage=storage, sampler=optuna.samplers.RandomSampler(seed=1))
        futures = [c.submit(study.optimize, objective, n_trials=1, pure=False) for _ in range(20)]
        wait(futures)
        for f in futures:
            f.result()
        trials = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
        assert len(trials) == 20
        assert len({t.number for t in trials}) == 20
        best = min(trials, key=lambda t: t.value)
        assert study.best_value == best.value
        assert study.best_params == best.params
        assert study.best_value == pytest.approx((best.params["x"] - 2) ** 2)
        # the study's storage lives in the scheduler's host
        n = c.run_on_scheduler(
            lambda dask_scheduler: len(next(iter(dask_scheduler.extensions["optuna"].storages.values()))
                                       .get_all_trials(0)))
        assert n == 20
