"""Peers' native files read unchanged: ElasticFlow's own header, Pollux workload directories."""

from __future__ import annotations

import pytest

from clustersim import traces


def test_elasticflow_simulators_own_header_is_read_unchanged():
    t = traces.read("elasticflow", "bundled:elasticflow_peer/elasticVpollux_e.csv").to_pydict()
    assert len(t["job_id"]) == 195
    # first row: 0,3715485,2011,cifar10,3719996,4096,1,5644
    assert (t["job_id"][0], t["submit_time"][0], t["iterations"][0], t["model"][0], t["deadline"][0],
            t["batch_size"][0], t["duration"][0]) == ("0", 3715485.0, 2011.0, "cifar10", 3719996.0, 4096, 5644.0)
    assert t["roles"][0][0]["count"] == 1


def test_both_elasticflow_headers_give_the_same_table(tmp_path):
    native = tmp_path / "n.csv"
    native.write_text("job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"
                      "a,10,100,bert,500,384,2,50\n")
    ours = tmp_path / "o.csv"
    ours.write_text("job_id,submission_time,duration,num_gpu,num_iteration,model_name,deadline,batch_size\n"
                    "a,10,50,2,100,bert,500,384\n")
    a, b = (traces.read("elasticflow", p).to_pydict() for p in (native, ours))
    a.pop("tenant"), b.pop("tenant")
    assert a == b


def test_a_pollux_workload_directory_is_one_trace_set():
    t = traces.read("pollux", "bundled:pollux/workloads").to_pydict()
    assert len(t["job_id"]) == 8 * 160
    assert sorted(set(t["tenant"])) == [f"workload-{i}" for i in range(1, 9)]
    assert t["job_id"][0] == "workload-1/cifar10-0" and len(set(t["job_id"])) == 1280


def test_an_empty_pollux_directory_is_an_error(tmp_path):
    with pytest.raises(Exception, match="needs \\*.csv files"):
        traces.read("pollux", tmp_path)
