"""A stand-in for the ``mlflow`` module (clustersim.tracking's tracker): records every call, as
JSON lines in the file $FAKE_TRACKER_LOG, so a test in another process can read them."""

import json
import os
from contextlib import contextmanager


def _record(call, *args, **kwargs):
    with open(os.environ["FAKE_TRACKER_LOG"], "a") as f:
        f.write(json.dumps([call, list(args), kwargs], default=str) + "\n")


def set_tracking_uri(uri):
    _record("set_tracking_uri", uri)


def set_experiment(name):
    _record("set_experiment", name)


@contextmanager
def start_run(run_name=None):
    _record("start_run", run_name=run_name)
    yield
    _record("end_run")


def log_params(p):
    _record("log_params", p)


def log_metrics(m):
    _record("log_metrics", m)


def set_tags(t):
    _record("set_tags", t)


def log_artifact(path):
    _record("log_artifact", path)
