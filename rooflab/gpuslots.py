"""GPU slots: up to K measuring jobs at once on a host with K or more GPUs, each on its own GPU.

Snakemake counts GPUs (`--resources gpu=K`) but gives a local job no GPU id. A measuring job
therefore calls `claim_for_job()` before it touches CUDA: it takes the first free of the run's K
slots (an exclusive `flock` on <lock dir>/<GPU id>.lock, which the kernel drops when the process
ends, however it ends, SIGKILL included), points CUDA_VISIBLE_DEVICES at that GPU alone and pins
the process and its threads to the slot's share of the host's cores. Another job of the same run,
or of another run on the same host, waits for a slot rather than share a GPU.

K is the run's `--resources gpu=K` (the Snakefile passes it on as $ROOFLAB_GPU_SLOTS), else every
GPU the host shows. The GPUs are those of $CUDA_VISIBLE_DEVICES when it is set, else the UUIDs
nvidia-smi lists. Under a scheduler ($SLURM_JOB_ID) the scheduler has placed the job: nothing is
claimed. On a host without a GPU nothing is claimed either.

Every function takes its GPUs, CPUs and environment as arguments, so the allocator is tested
without a GPU.
"""
from __future__ import annotations

import errno
import fcntl
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SLOTS_VAR = "ROOFLAB_GPU_SLOTS"          # K, set by the Snakefile from --resources gpu=K
LOCK_DIR_VAR = "ROOFLAB_GPU_LOCKS"       # where the per-GPU lock files live (host-wide)
DEFAULT_LOCK_DIR = Path(tempfile.gettempdir()) / "rooflab-gpu-slots"


def host_gpus(env=None, query=None) -> list[str]:
    """Ids of the GPUs jobs may use: $CUDA_VISIBLE_DEVICES's entries when it is set (empty or -1:
    none), else the UUIDs from `query()` (nvidia-smi by default; [] without a driver)."""
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [part.strip() for part in visible.split(",") if part.strip()]
        return [] if not ids or ids[0] == "-1" else ids
    return list((query or _nvidia_smi_uuids)())


def _nvidia_smi_uuids() -> list[str]:
    from rooflab.workflow import gpu_query
    return gpu_query("uuid")


def slot_count(k, gpus: list[str]) -> int:
    """The number of slots for a run asking for `k` GPUs (None: all of `gpus`) on a host with `gpus`.

    Raises ValueError naming the problem for k < 1, k above the GPUs the host has, or a k that is
    not a whole number."""
    n = len(gpus)
    if k is None:
        return n
    if isinstance(k, bool) or not isinstance(k, int):
        try:
            k = int(str(k).strip())
        except ValueError:
            raise ValueError(f"--resources gpu={k!r}: the GPU count must be a whole number") from None
    if k < 1:
        raise ValueError(f"--resources gpu={k} leaves no GPU slot, but every measuring job needs one GPU: "
                         f"give gpu=N with 1 <= N <= {n} (the GPUs this host has)" if n else
                         f"--resources gpu={k} leaves no GPU slot, but every measuring job needs one GPU")
    if k > n:
        listed = ", ".join(gpus) if gpus else "none"
        raise ValueError(f"--resources gpu={k} but this host has {n} GPU{'s' if n != 1 else ''} ({listed}): "
                         f"give gpu=N with N <= {n}" if n else
                         f"--resources gpu={k} but this host has no GPU (nvidia-smi lists none)")
    return k


def check_run(resource, local: bool) -> int | None:
    """Parse time (the Snakefile): the GPU slots of a local measuring run, checked against this
    host's GPUs and passed on to the jobs ($ROOFLAB_GPU_SLOTS); None under a cluster executor.
    `resource` is Snakemake's global `gpu` resource (--resources gpu=K), None when not given.
    SystemExit with one line when K is not a count this host can honour."""
    if not local:
        return None
    try:
        return configure_run(getattr(resource, "value", resource), host_gpus())
    except ValueError as err:
        raise SystemExit(str(err)) from None


def cores_for(index: int, k: int, cpus) -> list[int]:
    """Slot `index`'s share of `cpus` when k slots split them: contiguous, as even as possible;
    with fewer cores than slots, slots share them round-robin."""
    cpus = sorted(cpus)
    if not 0 <= index < k:
        raise ValueError(f"slot {index} is not one of 0..{k - 1}")
    if not cpus:
        raise ValueError("no CPU cores to share among the GPU slots")
    if len(cpus) < k:
        return [cpus[index % len(cpus)]]
    base, extra = divmod(len(cpus), k)
    start = index * base + min(index, extra)
    return cpus[start:start + base + (1 if index < extra else 0)]


@dataclass
class Slot:
    """A held GPU slot: its index among the K, the GPU's id, the cores it owns, the lock file."""
    index: int
    gpu: str
    cores: list[int]
    path: Path
    k: int = 1
    _handle: object = field(default=None, repr=False)

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()         # closing the descriptor drops the flock
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def lock_path(lock_dir, gpu: str) -> Path:
    """The lock file of one GPU (its id made safe as a file name)."""
    return Path(lock_dir) / (re.sub(r"[^A-Za-z0-9_.-]+", "_", gpu) + ".lock")


def _try_lock(path: Path):
    handle = open(path, "a+")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        handle.close()
        if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")     # who holds it, for the waiting message
    handle.flush()
    return handle


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "?"
    except OSError:
        return "?"


def acquire(gpus: list[str], k, lock_dir=None, cpus=None, wait_s: float | None = None,
            poll_s: float = 0.5, say=None) -> Slot:
    """Hold the first free of the first k of `gpus` (k None: all), waiting for one as long as
    `wait_s` allows (None: as long as it takes; then TimeoutError naming the holders' pids)."""
    k = slot_count(k, gpus)
    if k == 0:
        raise ValueError("no GPU to claim: this host has none")
    lock_dir = Path(lock_dir or DEFAULT_LOCK_DIR)
    lock_dir.mkdir(parents=True, exist_ok=True)
    cpus = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
    paths = [lock_path(lock_dir, gpu) for gpu in gpus[:k]]
    start, told = time.monotonic(), False
    while True:
        for index, path in enumerate(paths):
            handle = _try_lock(path)
            if handle is not None:
                return Slot(index, gpus[index], cores_for(index, k, cpus), path, k, handle)
        holders = ", ".join(f"{gpu} (pid {_holder(p)})" for gpu, p in zip(gpus, paths))
        if wait_s is not None and time.monotonic() - start >= wait_s:
            raise TimeoutError(f"no free GPU slot of {k} after {wait_s:g} s: held by {holders}")
        if not told and say:
            say(f"all {k} GPU slots busy ({holders}); waiting for one")
            told = True
        time.sleep(poll_s)


def pin(slot: Slot, env=None) -> None:
    """Make this process use the slot's GPU and cores: CUDA_VISIBLE_DEVICES, CPU affinity and thread counts.
    Call before CUDA is initialised (importing torch is fine; its first CUDA call is not)."""
    env = os.environ if env is None else env
    env["CUDA_VISIBLE_DEVICES"] = slot.gpu
    threads = str(len(slot.cores))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = threads
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, slot.cores)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(len(slot.cores))


def claim_for_job(resources=None, env=None, query=None, lock_dir=None, say=print) -> Slot | None:
    """A measuring job's GPU slot, held until the process ends; None where there is nothing to claim
    (a job that asks for no GPU, a job a scheduler placed, a host without a GPU).

    With one slot and no CUDA_VISIBLE_DEVICES of its own the job keeps the whole host (no pinning,
    the environment unchanged), so a one-GPU run behaves as it always has; the lock still keeps a
    second run on the same host off the GPU while the job measures."""
    env = os.environ if env is None else env
    if resources is not None and not int(resources.get("gpu", 0) or 0):
        return None
    if env.get("SLURM_JOB_ID"):
        return None
    gpus = host_gpus(env, query)
    if not gpus:
        return None
    k = slot_count(env.get(SLOTS_VAR) or None, gpus)
    slot = acquire(gpus, k, lock_dir or env.get(LOCK_DIR_VAR), say=say)
    if k > 1 or len(gpus) > 1:
        pin(slot, env)
        if say:
            say(f"GPU slot {slot.index + 1} of {k}: CUDA_VISIBLE_DEVICES={slot.gpu}, cores {slot.cores}")
    return slot


def configure_run(k, gpus: list[str], env=None) -> int:
    """Parse time (the Snakefile): check the run's --resources gpu=K against the host's GPUs and pass
    K to the jobs. Returns the number of slots; raises ValueError with the reason."""
    env = os.environ if env is None else env
    slots = slot_count(k, gpus)
    env[SLOTS_VAR] = str(slots)
    return slots


def own_path(slot: Slot, calibrated) -> Path:
    """Where a run of several slots keeps the ceilings measured on the slot's GPU: beside the
    calibrate rule's ceilings.csv, as ceilings/<GPU id>.csv."""
    return Path(calibrated).parent / "ceilings" / lock_path(".", slot.gpu).with_suffix(".csv").name


def keep_as_own(slot: Slot | None, calibrated) -> None:
    """The calibrate job of a run of several slots: its ceilings become its GPU's, and any other
    GPU's from an earlier run are dropped (each is measured again by its first job)."""
    if slot is None or slot.k == 1:
        return
    import shutil
    target = own_path(slot, calibrated)
    shutil.rmtree(target.parent, ignore_errors=True)
    target.parent.mkdir(parents=True)
    shutil.copyfile(calibrated, target)


def own_ceilings(slot: Slot | None, calibrated, config: dict, measure=None) -> str:
    """The ceilings.csv a measuring job judges its rows against: the calibrate rule's on a run of
    one slot (a one-GPU run, a cluster job); on a run of several, those of the job's own GPU,
    measured now (with config["calibrate"]'s sizes, by `measure(path, buffer_gib, matmul_n, read_sizes_mib,
    copy_sizes_mib)`) by the
    first job on a GPU that calibrate did not run on. The job holds the GPU's lock meanwhile, so
    no two jobs measure one GPU at once."""
    if slot is None or slot.k == 1:
        return str(calibrated)
    path = own_path(slot, calibrated)
    if not path.exists():
        if measure is None:
            from rooflab.ceilings import measure_csv as measure
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        print(f"measuring the ceilings of {slot.gpu} (calibrate ran on another GPU)")
        cal = config["calibrate"]
        measure(str(partial), cal["buffer_gib"], cal["matmul_n"], cal["read_sizes_mib"], cal["copy_sizes_mib"])
        partial.replace(path)
    return str(path)
