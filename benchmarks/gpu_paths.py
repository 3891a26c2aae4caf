"""Every GPU path of preflight run for real on one GPU machine, with the local transport, and what
each printed kept as test data.

Steps, in order, each under the one deadline (``--budget``, 8 minutes by default):

- ``smi``: nvidia-smi's own outputs (``-L``, ``-q``, every ``--query-gpu`` field the recorded H100
  capture has, ``--query-compute-apps``, ``nvlink --status``, ``topo -m``) and the driver's proc file.
- ``facts_nvml`` and ``facts_smi``: the facts bundle run directly with the machine's Python, once
  as it is (NVML through pynvml where the machine has it) and once with pynvml hidden (a
  ``pynvml`` that fails to import, first on PYTHONPATH), so that the nvidia-smi path runs.
- ``kernel_log``: ``dmesg --kernel`` as the facts read it (the XIDs the facts found are in both
  facts documents).
- ``infiniband``: every file of /sys/class/infiniband's devices and ports, where there is one.
- ``nccl_log``: a bare torchrun job, one rank per GPU, five NCCL all-reduces with
  ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET``: NCCL's log as this machine's NCCL writes it.
- ``check_one_rank`` and ``check_every_gpu``: ``preflight check`` on this machine (no hosts file:
  the local transport), with ``CUDA_VISIBLE_DEVICES=0`` and then with every GPU (burn, in-node
  all-reduce, NCCL all-reduce, DDP on CUDA): the JSON and HTML reports and what it printed.
- ``check_local``: ``preflight check --local`` (the node-local checks, as a Slurm prolog runs them).

Everything is written under ``--out`` (default: ``$OUT`` where it is set, else ./gpu-paths),
with ``steps.json`` and ``summary.md`` saying what ran, what was skipped and why. The machine's
own Python runs it all (``--python``); the checkout is put on PYTHONPATH. Where that Python lacks
the controller's packages (paramiko, rich, Jinja2...), a virtual environment with
``--system-site-packages`` is made beside the output and the checkout installed into it; if that
fails too, the ``preflight check`` steps are skipped and say why.

``--dry-run`` runs on a machine without a GPU: the same steps, those that need a GPU skipped and
named as such, those with a CPU path (the facts, the check with one rank on the CPU, the local
check) run it and say so. Without it, a machine without a GPU is refused.

    python3 benchmarks/gpu_paths.py --out /tmp/gpu-paths
    python3 benchmarks/gpu_paths.py --dry-run --out /tmp/gpu-paths
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
RECORDED_GPU = CHECKOUT / "tests" / "data" / "facts" / "smi_query_gpu_h100_590.48.01_idle.csv"
CONTROLLER_MODULES = ("paramiko", "rich", "ClusterShell", "packaging", "jinja2")
NCCL_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
BARE_NCCL_JOB = """
import os, torch, torch.distributed as dist
rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl")
buffer = torch.ones(16 * 1024 * 1024 // 4, device="cuda")
for _ in range(5):
    dist.all_reduce(buffer)
torch.cuda.synchronize()
print(f"rank {rank}: {buffer[0].item():.0f}", flush=True)
dist.destroy_process_group()
"""


@dataclass
class Step:
    """One step's outcome: ``ran``, ``skipped`` (with why) or ``failed`` (with why)."""

    name: str
    outcome: str = "ran"
    why: str = ""
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)


class Skip(Exception):
    """The step cannot run here; the message says why."""


@dataclass
class Machine:
    """What the steps need to know about this machine and the run."""

    out: Path
    python: str
    deadline: float
    smi: str | None
    gpus: int
    cuda_devices: int
    cuda_why: str
    dry_run: bool = False
    controller_python: str | None = None
    controller_why: str = ""
    note: str = ""  # the current step's: it ran its CPU path for lack of a GPU

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def need_gpu(self, *, cpu_path: bool = False) -> None:
        """Skips the step where there is no GPU; in a dry run, a step with a CPU path runs it."""
        why = "no GPU: nvidia-smi not found" if self.smi is None else "no GPU: nvidia-smi lists none"
        if self.smi is not None and self.gpus > 0:
            return
        if cpu_path and self.dry_run:
            self.note = f"{why}; ran its CPU path"
            return
        raise Skip(why)

    def need_cuda(self, *, cpu_path: bool = False) -> None:
        self.need_gpu(cpu_path=cpu_path)
        if self.cuda_devices == 0 and not self.note:
            raise Skip(f"no GPU for torch: {self.cuda_why}")

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """This process's environment with the checkout first on PYTHONPATH."""
        paths = [str(CHECKOUT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "NO_COLOR": "1", **(extra or {})}

    def run(
        self,
        argv: Sequence[str],
        name: str,
        *,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cap_s: float = 120,
    ) -> subprocess.CompletedProcess[bytes]:
        """Runs argv, keeps its stdout and stderr as ``name.out`` and ``name.err``."""
        timeout = min(cap_s, self.left_s())
        if timeout < 5:
            raise Skip("the time budget is spent")
        try:
            result = subprocess.run(
                list(argv), input=stdin, capture_output=True, timeout=timeout, env=env or self.env()
            )
        except subprocess.TimeoutExpired as exc:
            (self.out / f"{name}.out").write_bytes(exc.stdout or b"")
            (self.out / f"{name}.err").write_bytes(exc.stderr or b"")
            raise RuntimeError(f"{argv[0]} did not end in {timeout:.0f} s") from None
        (self.out / f"{name}.out").write_bytes(result.stdout)
        if result.stderr:
            (self.out / f"{name}.err").write_bytes(result.stderr)
        return result


def _probe_python(python: str, code: str, env: Mapping[str, str]) -> tuple[int, str]:
    try:
        result = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return result.returncode, (result.stdout if result.returncode == 0 else result.stderr).strip()


def survey(out: Path, python: str, budget_s: float) -> Machine:
    """nvidia-smi's GPU count and torch's CUDA device count on this machine."""
    smi = shutil.which("nvidia-smi")
    gpus = 0
    if smi is not None:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
        gpus = sum(line.startswith("GPU ") for line in listed.stdout.splitlines())
    machine = Machine(out, python, time.monotonic() + budget_s, smi, gpus, 0, "")
    code, said = _probe_python(python, "import torch; print(torch.cuda.device_count())", machine.env())
    if code != 0:
        machine.cuda_why = f"torch not importable with {python}: {said.splitlines()[-1] if said else ''}"
    else:
        machine.cuda_devices = int(said.splitlines()[-1])
        machine.cuda_why = "" if machine.cuda_devices else "torch sees no CUDA device"
    return machine


def controller(machine: Machine) -> None:
    """A Python that has the controller's packages: the machine's own, or a virtual environment
    on top of it with the checkout installed."""
    check = "import " + ", ".join(CONTROLLER_MODULES)
    code, said = _probe_python(machine.python, check, machine.env())
    if code == 0:
        machine.controller_python = machine.python
        return
    home = machine.out.parent / (machine.out.name + "-venv")
    python = str(home / "bin" / "python")
    try:
        if not Path(python).exists():
            venv.EnvBuilder(system_site_packages=True, with_pip=True).create(home)
        pip = subprocess.run(
            [python, "-m", "pip", "install", "-q", "-e", str(CHECKOUT)],
            capture_output=True,
            text=True,
            timeout=min(240, machine.left_s()),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        machine.controller_why = f"no controller environment: {exc}"
        return
    if pip.returncode != 0 or _probe_python(python, check, machine.env())[0] != 0:
        tail = (pip.stderr or pip.stdout).strip().splitlines()[-1:] or [said]
        machine.controller_why = f"{machine.python} lacks the controller's packages and pip failed: {tail[0]}"
        return
    machine.controller_python = python


# ---------------------------------------------------------------------------------------------
# The steps. Each returns the files it wrote (relative to the output folder) or raises Skip.


def step_smi(m: Machine) -> list[str]:
    m.need_gpu()
    assert m.smi is not None
    with RECORDED_GPU.open(encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle, skipinitialspace=True))
    fields = ",".join(column.split(" [")[0].strip() for column in header)
    apps = "timestamp,gpu_name,gpu_bus_id,gpu_serial,gpu_uuid,pid,process_name,used_gpu_memory"
    commands = {
        "smi_list": ["-L"],
        "smi_q": ["-q"],
        "smi_query_gpu": [f"--query-gpu={fields}", "--format=csv"],
        "smi_query_compute_apps": [f"--query-compute-apps={apps}", "--format=csv"],
        "smi_nvlink_status": ["nvlink", "--status"],
        "smi_topo": ["topo", "-m"],
    }
    written = []
    for name, args in commands.items():
        m.run([m.smi, *args], name, cap_s=60)
        written.append(f"{name}.out")
    version = Path("/proc/driver/nvidia/version")
    if version.exists():
        (m.out / "proc_driver_nvidia_version.txt").write_text(version.read_text())
        written.append("proc_driver_nvidia_version.txt")
    return written


def _facts_bundle() -> bytes:
    sys.path.insert(0, str(CHECKOUT))
    from preflight.probes import node_script

    return node_script("preflight.node.facts")


def _facts(m: Machine, name: str, env: Mapping[str, str]) -> list[str]:
    result = m.run([m.python, "-"], name, stdin=_facts_bundle(), env=env, cap_s=180)
    if result.returncode != 0:
        raise RuntimeError(f"the facts bundle exited {result.returncode}")
    document = json.loads(result.stdout)
    (m.out / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
    (m.out / f"{name}.out").unlink()
    return [f"{name}.json"]


def step_facts_nvml(m: Machine) -> list[str]:
    m.need_gpu(cpu_path=True)
    return _facts(m, "facts_nvml", m.env())


def step_facts_smi(m: Machine) -> list[str]:
    m.need_gpu(cpu_path=True)
    hidden = Path(tempfile.mkdtemp(prefix="hide-pynvml-"))  # not under --out: it is no data
    (hidden / "pynvml.py").write_text('raise ImportError("pynvml hidden by benchmarks/gpu_paths.py")\n')
    env = m.env()
    env["PYTHONPATH"] = os.pathsep.join([str(hidden), env["PYTHONPATH"]])
    return _facts(m, "facts_smi", env)


def step_kernel_log(m: Machine) -> list[str]:
    dmesg = shutil.which("dmesg")
    if dmesg is None:
        raise Skip("dmesg not found")
    result = m.run([dmesg, "--kernel"], "kernel_log", cap_s=60)
    if result.returncode != 0:
        raise RuntimeError(f"dmesg --kernel exited {result.returncode} (not allowed to read the log?)")
    return ["kernel_log.out"]


def step_infiniband(m: Machine) -> list[str]:
    root = Path("/sys/class/infiniband")
    if not root.is_dir() or not any(root.iterdir()):
        raise Skip("no /sys/class/infiniband here")
    lines = []
    for device in sorted(root.iterdir()):
        names = ["hca_type", "board_id", "fw_ver", "node_desc", "node_type", "node_guid"]
        files = [device / n for n in names]
        for port in sorted((device / "ports").iterdir()):
            files += [port / n for n in ("state", "phys_state", "rate", "link_layer", "lid", "sm_lid")]
            if (port / "counters").is_dir():
                files += sorted((port / "counters").iterdir())
        for path in files:
            try:
                text = path.read_text(errors="replace").strip()
            except OSError as exc:
                text = f"<{exc.strerror}>"
            lines.append(f"{path}: {text}")
    (m.out / "infiniband.txt").write_text("\n".join(lines) + "\n")
    return ["infiniband.txt"]


def step_nccl_log(m: Machine) -> list[str]:
    m.need_cuda()
    script = m.out / "bare_nccl_job.py"
    script.write_text(BARE_NCCL_JOB)
    argv = [m.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(m.cuda_devices),
            str(script)]  # fmt: skip
    result = m.run(argv, "nccl_allreduce", env=m.env(NCCL_ENV), cap_s=180)
    if result.returncode != 0:
        raise RuntimeError(f"the bare NCCL job exited {result.returncode}")
    return ["nccl_allreduce.out", "nccl_allreduce.err"]


def _check(m: Machine, name: str, args: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    if m.controller_python is None:
        raise Skip(m.controller_why)
    report = m.out / f"{name}.json"
    argv = [m.controller_python, "-m", "preflight", "check", "--json", str(report), *args]
    result = m.run(argv, name, env=m.env(env), cap_s=240)
    if not report.exists():
        raise RuntimeError(f"preflight check exited {result.returncode} without a report")
    verdict = json.loads(report.read_text()).get("verdict")
    (m.out / f"{name}.exit").write_text(f"exit {result.returncode}, verdict {verdict}\n")
    return [f"{name}.json", f"{name}.out", f"{name}.exit", *([f"{name}.html"] if "--html" in args else [])]


def step_check_one_rank(m: Machine) -> list[str]:
    m.need_cuda(cpu_path=True)
    html = str(m.out / "check_one_rank.html")
    return _check(m, "check_one_rank", ["--html", html], {"CUDA_VISIBLE_DEVICES": "0"})


def step_check_every_gpu(m: Machine) -> list[str]:
    m.need_cuda()
    return _check(m, "check_every_gpu", ["--html", str(m.out / "check_every_gpu.html")])


def step_check_local(m: Machine) -> list[str]:
    m.need_gpu(cpu_path=True)
    return _check(m, "check_local", ["--local"])


STEPS: tuple[tuple[str, Callable[[Machine], list[str]]], ...] = (
    ("smi", step_smi),
    ("facts_nvml", step_facts_nvml),
    ("facts_smi", step_facts_smi),
    ("kernel_log", step_kernel_log),
    ("infiniband", step_infiniband),
    ("nccl_log", step_nccl_log),
    ("check_one_rank", step_check_one_rank),
    ("check_every_gpu", step_check_every_gpu),
    ("check_local", step_check_local),
)


def run_steps(machine: Machine) -> list[Step]:
    steps = []
    for name, function in STEPS:
        step = Step(name)
        machine.note = ""
        started = time.monotonic()
        try:
            step.files = function(machine)
            step.why = machine.note
        except Skip as why:
            step.outcome, step.why = "skipped", str(why)
        except Exception as exc:  # one step's failure must not cost the others' captures
            step.outcome, step.why = "failed", f"{type(exc).__name__}: {exc}"
        step.seconds = round(time.monotonic() - started, 1)
        print(f"{name}: {step.outcome} in {step.seconds} s{': ' + step.why if step.why else ''}", flush=True)
        steps.append(step)
    return steps


def summary(machine: Machine, steps: Sequence[Step]) -> str:
    lines = [
        f"GPUs listed by nvidia-smi: {machine.gpus}; CUDA devices torch sees: {machine.cuda_devices}"
        + (f" ({machine.cuda_why})" if machine.cuda_why else ""),
        f"Python: {machine.python}; controller: {machine.controller_python or machine.controller_why}",
        "",
        "| step | outcome | s | why | files |",
        "|---|---|---:|---|---|",
    ]
    for s in steps:
        lines.append(f"| {s.name} | {s.outcome} | {s.seconds} | {s.why} | {', '.join(s.files)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default_out = os.environ.get("OUT") or "gpu-paths"
    parser.add_argument("--out", type=Path, default=Path(default_out), help="where the outputs go")
    parser.add_argument("--python", default=sys.executable, help="the Python with torch (default: this one)")
    parser.add_argument("--budget", type=float, default=480, help="seconds for every step together")
    parser.add_argument(
        "--dry-run", action="store_true", help="on a machine without a GPU: skip what needs one"
    )
    args = parser.parse_args()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    machine = survey(out, args.python, args.budget)
    machine.dry_run = args.dry_run
    if machine.gpus == 0 and not args.dry_run:
        print("no GPU here (nvidia-smi missing or listing none): pass --dry-run to run what needs none")
        return 2
    controller(machine)
    steps = run_steps(machine)
    (out / "steps.json").write_text(json.dumps([asdict(s) for s in steps], indent=1) + "\n")
    text = summary(machine, steps)
    (out / "summary.md").write_text(text)
    print("\n" + text)
    return 1 if any(s.outcome == "failed" for s in steps) else 0


if __name__ == "__main__":
    sys.exit(main())
