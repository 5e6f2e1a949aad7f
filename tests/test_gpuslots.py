"""The GPU-slot allocator (rooflab/gpuslots.py), without GPUs: the GPU list is injected and the
holders are real processes, so a lock that is not exclusive, or not freed on SIGKILL, fails here."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rooflab import gpuslots

ROOT = Path(__file__).resolve().parent.parent

# A job: hold a slot of `k` among `gpus`, write what it holds to `out`, keep it `hold_s` seconds.
JOB = """
import json, sys, time
from rooflab import gpuslots
gpus, k, lock_dir, out, hold_s = json.loads(sys.argv[1])
slot = gpuslots.acquire(gpus, k, lock_dir, cpus=[0, 1, 2, 3], poll_s=0.02)
start = time.time()
print("held", slot.gpu, flush=True)
time.sleep(hold_s)
with open(out, "w") as handle:
    json.dump({"gpu": slot.gpu, "start": start, "end": time.time(), "cores": slot.cores}, handle)
"""


def _job(gpus, k, lock_dir, out, hold_s):
    return subprocess.Popen([sys.executable, "-c", JOB, json.dumps([gpus, k, str(lock_dir), str(out), hold_s])],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)


def test_concurrent_jobs_never_share_a_gpu(tmp_path):
    gpus = ["GPU-a", "GPU-b"]
    jobs = [_job(gpus, 2, tmp_path / "locks", tmp_path / f"job{i}.json", 0.4) for i in range(5)]
    for job in jobs:
        assert job.wait(timeout=60) == 0
    held = [json.loads((tmp_path / f"job{i}.json").read_text()) for i in range(5)]
    assert {h["gpu"] for h in held} == set(gpus)       # both GPUs used
    for gpu in gpus:
        spans = sorted((h["start"], h["end"]) for h in held if h["gpu"] == gpu)
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end, f"two jobs held {gpu} at once: {spans}"
    by_gpu = {h["gpu"]: h["cores"] for h in held}
    assert by_gpu == {"GPU-a": [0, 1], "GPU-b": [2, 3]}   # each slot its own half of the cores


def test_a_killed_jobs_slot_is_freed(tmp_path):
    locks = tmp_path / "locks"
    holder = _job(["GPU-a"], 1, locks, tmp_path / "never.json", 600)
    try:
        assert holder.stdout.readline().split() == ["held", "GPU-a"]
        with pytest.raises(TimeoutError, match=r"no free GPU slot of 1 .*GPU-a \(pid \d+\)"):
            gpuslots.acquire(["GPU-a"], 1, locks, cpus=[0], wait_s=0.1, poll_s=0.02)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
    with gpuslots.acquire(["GPU-a"], 1, locks, cpus=[0], wait_s=5, poll_s=0.02) as slot:
        assert slot.gpu == "GPU-a"


def test_a_released_slot_can_be_taken_again(tmp_path):
    first = gpuslots.acquire(["GPU-a", "GPU-b"], 2, tmp_path, cpus=[0, 1])
    second = gpuslots.acquire(["GPU-a", "GPU-b"], 2, tmp_path, cpus=[0, 1])
    assert (first.gpu, second.gpu) == ("GPU-a", "GPU-b")
    with pytest.raises(TimeoutError):
        gpuslots.acquire(["GPU-a", "GPU-b"], 2, tmp_path, cpus=[0, 1], wait_s=0)
    first.release()
    assert gpuslots.acquire(["GPU-a", "GPU-b"], 2, tmp_path, cpus=[0, 1], wait_s=0).gpu == "GPU-a"
    second.release()


def test_only_the_first_k_gpus_are_used(tmp_path):
    held = gpuslots.acquire(["GPU-a", "GPU-b", "GPU-c"], 1, tmp_path, cpus=[0])
    with pytest.raises(TimeoutError, match="no free GPU slot of 1"):
        gpuslots.acquire(["GPU-a", "GPU-b", "GPU-c"], 1, tmp_path, cpus=[0], wait_s=0)
    held.release()


@pytest.mark.parametrize("k", [0, -1, "0"])
def test_no_slot_at_all_is_a_clear_error(k):
    with pytest.raises(ValueError, match=r"gpu=-?\d+ leaves no GPU slot.*1 <= N <= 2"):
        gpuslots.slot_count(k, ["GPU-a", "GPU-b"])


def test_more_slots_than_gpus_is_a_clear_error():
    with pytest.raises(ValueError, match=r"--resources gpu=3 but this host has 2 GPUs \(GPU-a, GPU-b\): give gpu=N with N <= 2"):
        gpuslots.slot_count(3, ["GPU-a", "GPU-b"])
    with pytest.raises(ValueError, match="this host has no GPU"):
        gpuslots.slot_count(1, [])
    with pytest.raises(ValueError, match="must be a whole number"):
        gpuslots.slot_count("two", ["GPU-a"])


def test_slot_count_defaults_to_every_gpu():
    assert gpuslots.slot_count(None, ["GPU-a", "GPU-b"]) == 2
    assert gpuslots.slot_count("2", ["GPU-a", "GPU-b"]) == 2
    assert gpuslots.slot_count(None, []) == 0


def test_the_snakefile_check_says_one_line(monkeypatch):
    monkeypatch.setattr(gpuslots, "host_gpus", lambda: ["GPU-a", "GPU-b"])
    monkeypatch.delenv(gpuslots.SLOTS_VAR, raising=False)
    with pytest.raises(SystemExit, match=r"^--resources gpu=4 but this host has 2 GPUs"):
        gpuslots.check_run(4, local=True)
    assert gpuslots.check_run(None, local=True) == 2 and os.environ[gpuslots.SLOTS_VAR] == "2"
    assert gpuslots.check_run(4, local=False) is None        # a cluster places GPU jobs itself


@pytest.mark.parametrize("k, cpus, expected", [
    (2, range(8), [[0, 1, 2, 3], [4, 5, 6, 7]]),
    (3, range(8), [[0, 1, 2], [3, 4, 5], [6, 7]]),
    (4, [1, 3], [[1], [3], [1], [3]]),                     # fewer cores than slots: shared round-robin
    (1, [5, 2, 7], [[2, 5, 7]]),
])
def test_cores_are_shared_out(k, cpus, expected):
    assert [gpuslots.cores_for(i, k, cpus) for i in range(k)] == expected


def test_visible_gpus_come_from_cuda_visible_devices_first():
    assert gpuslots.host_gpus({"CUDA_VISIBLE_DEVICES": "2, 3"}, query=lambda: ["x"]) == ["2", "3"]
    assert gpuslots.host_gpus({"CUDA_VISIBLE_DEVICES": ""}, query=lambda: ["x"]) == []
    assert gpuslots.host_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, query=lambda: ["x"]) == []
    assert gpuslots.host_gpus({}, query=lambda: ["GPU-a", "GPU-b"]) == ["GPU-a", "GPU-b"]


def test_nothing_is_claimed_without_a_gpu_job_or_under_a_scheduler(tmp_path):
    query = lambda: ["GPU-a"]   # noqa: E731
    assert gpuslots.claim_for_job({"gpu": 0}, env={}, query=query, lock_dir=tmp_path) is None
    assert gpuslots.claim_for_job({"gpu": 1}, env={"SLURM_JOB_ID": "7"}, query=query, lock_dir=tmp_path) is None
    assert gpuslots.claim_for_job({"gpu": 1}, env={}, query=lambda: [], lock_dir=tmp_path) is None


def test_one_gpu_keeps_the_job_as_it_was(tmp_path):
    env = {}
    slot = gpuslots.claim_for_job({"gpu": 1}, env=env, query=lambda: ["GPU-a"], lock_dir=tmp_path, say=None)
    assert slot.gpu == "GPU-a" and env == {}                 # no CUDA_VISIBLE_DEVICES, no pinning
    slot.release()


CLAIM = """
import json, os, sys
from rooflab import gpuslots
env = {"ROOFLAB_GPU_SLOTS": "2", "ROOFLAB_GPU_LOCKS": sys.argv[1]}
held = gpuslots.acquire(["GPU-a", "GPU-b"], 2, sys.argv[1], cpus=sorted(os.sched_getaffinity(0)))  # GPU-a taken
slot = gpuslots.claim_for_job({"gpu": 1}, env=env, query=lambda: ["GPU-a", "GPU-b"], say=None)
print(json.dumps({"gpu": slot.gpu, "env": env, "affinity": sorted(os.sched_getaffinity(0)), "cores": slot.cores}))
"""


def test_a_second_gpu_job_gets_the_other_gpu_and_its_cores(tmp_path):
    run = subprocess.run([sys.executable, "-c", CLAIM, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["gpu"] == "GPU-b" and got["env"]["CUDA_VISIBLE_DEVICES"] == "GPU-b"
    assert got["affinity"] == got["cores"] and got["env"]["OMP_NUM_THREADS"] == str(len(got["cores"]))


def test_each_gpu_of_a_shared_run_has_its_own_ceilings(tmp_path):
    calibrated = tmp_path / "ceilings.csv"
    calibrated.write_text("name,value,unit,how\ncopy_tbps,4.1,TB/s,calibrate\n")
    config = {"calibrate": {"buffer_gib": 2, "matmul_n": 8192, "read_sizes_mib": [256], "copy_sizes_mib": [64]}}
    measured = []

    def measure(path, buffer_gib, matmul_n, read_sizes_mib, copy_sizes_mib):
        assert read_sizes_mib == [256] and copy_sizes_mib == [64]
        measured.append((Path(path).name, buffer_gib, matmul_n))
        Path(path).write_text("name,value,unit,how\ncopy_tbps,4.0,TB/s,own\n")

    one = gpuslots.Slot(0, "GPU-a", [0], tmp_path / "a.lock", k=1)
    assert gpuslots.own_ceilings(one, calibrated, config, measure) == str(calibrated)   # one GPU: calibrate's
    assert gpuslots.own_ceilings(None, calibrated, config, measure) == str(calibrated)
    a, b = (gpuslots.Slot(i, gpu, [i], tmp_path / f"{gpu}.lock", k=2) for i, gpu in enumerate(["GPU-a", "GPU-b"]))
    gpuslots.keep_as_own(a, calibrated)                       # calibrate ran on GPU-a
    assert gpuslots.own_ceilings(a, calibrated, config, measure) == str(tmp_path / "ceilings" / "GPU-a.csv")
    assert measured == []
    path_b = gpuslots.own_ceilings(b, calibrated, config, measure)
    assert Path(path_b).read_text().endswith("own\n") and measured == [("GPU-b.partial", 2, 8192)]
    gpuslots.own_ceilings(b, calibrated, config, measure)     # measured once per GPU
    assert len(measured) == 1
    gpuslots.keep_as_own(a, calibrated)                       # a new calibration drops the other GPUs' ceilings
    assert sorted(p.name for p in (tmp_path / "ceilings").iterdir()) == ["GPU-a.csv"]
