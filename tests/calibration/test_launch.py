"""Calibration tasks end with their own exit code, never with the interpreter's teardown."""

import multiprocessing as mp

import pytest

pytest.importorskip("torch", reason='torch is not installed: pip install "clustersim[calibrate]" (torch==2.13.0)')

from clustersim.simulator.calibration.launch import exit_after  # noqa: E402


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _fail(path):
    raise ValueError(f"cannot measure {path}")


def _run(fn, *args):
    proc = mp.get_context("spawn").Process(target=exit_after, args=(fn, *args))
    proc.start()
    proc.join(120)
    return proc.exitcode


def test_a_task_that_returns_exits_0_after_writing_its_result(tmp_path):
    out = tmp_path / "result"
    assert _run(_write, str(out), "42") == 0
    assert out.read_text() == "42"


def test_a_task_that_raises_exits_1_and_prints_its_traceback(tmp_path, capfd):
    assert _run(_fail, str(tmp_path)) == 1
    assert "ValueError: cannot measure" in capfd.readouterr().err


@pytest.mark.parametrize("name", ["mlp", "cnn", "recommendation"])
def test_every_process_builds_the_same_initial_model(name, torch_one_thread):
    """A job's tasks each build the model: their initial parameters must agree (a data-parallel
    job starting on n workers averages gradients of one model; a PS job's reference is one model)."""
    import torch

    from clustersim.simulator.calibration import workloads

    small = {"mlp": {"samples": 64, "features": 8, "hidden": [8, 8]}, "cnn": {"samples": 8, "image": 8},
             "recommendation": {"samples": 64, "rows": 50}}[name]
    torch.manual_seed(123)                                 # whatever the process's RNG state before
    a = [q.detach().clone() for q in workloads.build({"name": name, "params": small}).model.parameters()]
    torch.rand(7)
    b = [q.detach() for q in workloads.build({"name": name, "params": small}).model.parameters()]
    assert all(torch.equal(x, y) for x, y in zip(a, b))
