"""The state of the GPU a job measures on: clocks, throttle reasons, other processes, host load.

Read through NVML (nvidia-ml-py) where it is installed, else through `nvidia-smi`; recorded,
never changed. A job first brings the GPU out of idle (`warm_up`: dense matmuls until the SM
clock stops rising), then `Monitor.read()` around each case tells whether the case ran under
throttling or a clock drop, in which case the harness measures it again.
"""
from __future__ import annotations

import datetime as _dt
import os
import time

# Throttle reasons that slow a kernel down for reasons of its surroundings, not of its own work
# (the SW power cap is left out: dense matmuls reach it by design; a clock drop still counts).
SLOWDOWN_REASONS = {
    0x0000000000000008: "hw_slowdown",
    0x0000000000000020: "sw_thermal_slowdown",
    0x0000000000000040: "hw_thermal_slowdown",
    0x0000000000000080: "hw_power_brake_slowdown",
}
ALL_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
               0x100: "sync_boost", 0x200: "display_clock_setting", **SLOWDOWN_REASONS}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _reasons(mask: int) -> list[str]:
    return [name for bit, name in sorted(ALL_REASONS.items()) if mask & bit]


class Monitor:
    """Clock and throttle readings of CUDA device 0 of this process (found by its UUID)."""

    def __init__(self):
        import torch
        self.uuid = "GPU-" + str(torch.cuda.get_device_properties(0).uuid)
        self._nvml = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByUUID(self.uuid)
        except Exception:   # no NVML bindings, or NVML unusable here: fall back to nvidia-smi
            self._nvml = None

    def read(self) -> dict:
        """{sm_mhz, mem_mhz, temp_c, power_w, throttle: [names], slowdown: bool, time}."""
        if self._nvml is not None:
            n, h = self._nvml, self._handle
            get_reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                n.nvmlDeviceGetCurrentClocksThrottleReasons
            mask = int(get_reasons(h))
            state = {"sm_mhz": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                     "mem_mhz": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
                     "temp_c": n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
                     "power_w": round(n.nvmlDeviceGetPowerUsage(h) / 1000, 1)}
        else:
            fields = "clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active"
            out = _smi(["--id=" + self.uuid, f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
            if not out:
                return {"available": False, "time": _now(), "slowdown": False, "throttle": []}
            sm, mem, temp, power, mask = (v.strip() for v in out.splitlines()[0].split(","))
            mask = int(mask, 16) if mask.startswith("0x") else 0
            state = {"sm_mhz": _number(sm), "mem_mhz": _number(mem), "temp_c": _number(temp),
                     "power_w": _number(power)}
        state.update(throttle=_reasons(mask), slowdown=any(mask & bit for bit in SLOWDOWN_REASONS),
                     time=_now(), available=True)
        return state

    def processes(self) -> list[dict]:
        """Compute processes on this GPU other than this one (pid, name, used MiB)."""
        out = _smi(["--id=" + self.uuid, "--query-compute-apps=pid,process_name,used_memory",
                    "--format=csv,noheader,nounits"]) or ""
        procs = []
        for line in out.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 3 and parts[0].isdigit() and int(parts[0]) != os.getpid():
                procs.append({"pid": int(parts[0]), "name": parts[1], "used_mib": _number(parts[2])})
        return procs


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return None


def _smi(args: list[str]) -> str | None:
    from rooflab.gpus import run_command
    return run_command(["nvidia-smi", *args])


def warm_up(monitor: Monitor, min_s: float = 1.0, max_s: float = 10.0, n: int = 4096) -> dict:
    """Dense bf16 matmuls until the SM clock is steady (two readings 0.25 s apart within 1 %,
    after at least min_s); returns the readings and the steady clock."""
    import torch
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    readings, start = [monitor.read()], time.perf_counter()
    while time.perf_counter() - start < max_s:
        stop = time.perf_counter() + 0.25
        while time.perf_counter() < stop:
            for _ in range(8):
                a @ b
            torch.cuda.synchronize()
        readings.append(monitor.read())
        clocks = [r.get("sm_mhz") or 0 for r in readings[-2:]]
        if time.perf_counter() - start >= min_s and clocks[0] and abs(clocks[1] - clocks[0]) <= 0.01 * clocks[0]:
            break
    del a, b
    torch.cuda.empty_cache()
    return {"seconds": round(time.perf_counter() - start, 2), "steady_sm_mhz": readings[-1].get("sm_mhz"),
            "sm_mhz_readings": [r.get("sm_mhz") for r in readings]}


def job_record(monitor: Monitor) -> dict:
    """What a job records at its start and end: GPU identity, clocks, other processes, host load."""
    return {"time": _now(), "gpu_uuid": monitor.uuid,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "state": monitor.read(), "other_processes": monitor.processes(),
            "host_loadavg": list(os.getloadavg()), "host_cpus": os.cpu_count()}


def process_age_s() -> float | None:
    """Seconds since this process started (interpreter start-up, imports, CUDA context), from
    /proc; None where there is no /proc."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            up = float(uptime.read().split()[0])
        return round(up - started_ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None


def start_job() -> tuple[Monitor, dict]:
    """A measuring job's monitor and its record so far: how long the process took to get here,
    the state at its start, then the warm-up."""
    age = process_age_s()
    monitor = Monitor()
    record = {"process_age_s": age, "start": job_record(monitor)}
    record["warm_up"] = warm_up(monitor)
    return monitor, record
