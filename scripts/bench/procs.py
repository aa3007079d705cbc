"""Processes of one benchmark cluster: a scheduler (Go or Python), stock
`dask worker`s or Go zero workers, and a sampler that watches them from
outside with psutil.

Every process is started here as a direct child, remembered by PID and
stopped by that PID (SIGTERM, then SIGKILL after a grace period), also when a
run fails. The worker processes the nannies spawn are found by asking each
worker for its PID (client.run(os.getpid)); they are stopped by PID too if
their nanny left them behind. Nothing else on the machine is touched.
"""

from __future__ import annotations

import contextlib

import json
import os
import re
import signal
import subprocess
import tempfile
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
BENCH = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
GO_SCHEDULER = Path(os.environ.get("DASK_GO_SCHEDULER_BINARY", ROOT / "bin" / "dask-go-scheduler"))  # an override, e.g. an older build to compare
ZERO_WORKER = ROOT / "bin" / "dask-go-zero-worker"

SATURATION = "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION"
COASSIGN = "DASK_DISTRIBUTED__SCHEDULER__ROOT_TASK_CO_ASSIGNMENT"

# name -> (scheduler kind, scheduler environment). The names are the ones the
# stored results use.
CONFIGS: dict[str, tuple[str, dict[str, str]]] = {
    "py-queuing": ("py", {SATURATION: "1.1"}),
    "py-noqueue": ("py", {SATURATION: "inf"}),
    "go-noqueue": ("go", {SATURATION: "inf"}),
    "go-queuing": ("go", {SATURATION: "1.1"}),
    "go-queuing-coassign": ("go", {SATURATION: "1.1", COASSIGN: "True"}),
}

# Configurations for diagnosis only (trace_memory.py, or bench.sh into its own --results), never in
# the benchmark table: the Python scheduler without work stealing, which the
# Go scheduler did not implement when the table was measured (scripts/bench/stealing.py
# compares both schedulers with stealing on and off).
DIAGNOSTIC_CONFIGS: dict[str, tuple[str, dict[str, str]]] = {
    "py-queuing-nosteal": ("py", {SATURATION: "1.1", "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}),
    "py-noqueue-nosteal": ("py", {SATURATION: "inf", "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}),
    "go-queuing-nosteal": ("go", {SATURATION: "1.1", "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}),
    "go-noqueue-nosteal": ("go", {SATURATION: "inf", "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}),
    "go-queuing-coassign-nosteal": ("go", {SATURATION: "1.1", COASSIGN: "True",
                                           "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}),
}


def resolve_config(name: str) -> tuple[str, dict[str, str]]:
    """(scheduler kind, environment) of a configuration. NAME-seedN is NAME
    with PYTHONHASHSEED=N in the scheduler's environment: dask.order
    iterates sets, so its priorities depend on the string hash seed, which
    both schedulers draw per process unless that fixes it. Runs paired by
    seed compare the schedulers on the same priorities (the Go scheduler used
    to order under seed 0 always, most of its extra memory on dot-product).
    NAME@PATH is a Go configuration run by the binary at PATH (an older
    build, to compare or bisect with). KeyError for an unknown name."""
    name, binary = split_binary(name)
    base, seed = split_seed(name)
    kind, env = CONFIGS[base] if base in CONFIGS else DIAGNOSTIC_CONFIGS[base]
    if binary is not None:
        if kind != "go":
            raise KeyError(f"{name}@{binary}: a binary applies to Go configurations only")
        kind = f"go:{binary}"
    return (kind, env) if seed is None else (kind, {**env, "PYTHONHASHSEED": str(seed)})


def path_label(config: str) -> str:
    """A configuration's or scheduler's name as a file name's part (NAME@PATH and go:PATH hold
    slashes)."""
    return re.sub(r"[^A-Za-z0-9+._-]", "_", config)


def split_binary(name: str) -> tuple[str, str | None]:
    """(configuration, binary) of NAME@PATH, else (name, None)."""
    base, sep, binary = name.partition("@")
    return (base, binary) if sep else (name, None)


def split_seed(name: str) -> tuple[str, int | None]:
    """(configuration, seed) of NAME-seedN when NAME is a configuration,
    else (name, None)."""
    m = re.fullmatch(r"(.+)-seed(\d+)", name)
    if m and m.group(1) in (*CONFIGS, *DIAGNOSTIC_CONFIGS):
        return m.group(1), int(m.group(2))
    return name, None


def known_config(name: str) -> bool:
    try:
        resolve_config(name)
    except KeyError:
        return False
    return True


def python_env(extra: dict | None = None) -> dict:
    """Scheduler, materializer and workers import the workload module (its
    task functions are pickled by reference), as a user's own modules are
    importable in the cluster's software environment."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(BENCH), env.get("PYTHONPATH", "")] if p)
    for key in (SATURATION, COASSIGN):  # only the configuration decides these
        env.pop(key, None)
    env.update(extra or {})
    return env


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop exactly this child: SIGTERM, wait, then SIGKILL."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def stop_pid(pid: int, grace: float = 5.0) -> None:
    """Stop a grandchild (a nanny's worker process) by PID if it outlived its nanny."""
    try:
        p = psutil.Process(pid)
        p.terminate()
        p.wait(grace)
    except psutil.TimeoutExpired:
        p.kill()
    except psutil.NoSuchProcess:
        pass


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: process {proc.pid} exited with {proc.returncode}")
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def run_interleaved(tmp: Path, name: str, cases: list[str], repetitions: int, kinds, run, describe,
                    on_record=lambda results: None, profile: Path | None = None) -> list[dict]:
    """The case benchmarks' schedule (graph-path, waiting): for each
    repetition, each case, each scheduler kinds(case, rep) lists (py, then
    go) on even repetitions and in reverse on odd ones, run(case, kind,
    directory, profile directory or None) in a fresh directory under tmp.
    Each record gets its repetition, on_record sees the results so far, and
    a progress line is printed (describe(record) for a run that succeeded).

    The order turns because the second run of a round is often the slower:
    two builds at 1,000 workers, 10 rounds, the second slower in 7
    (results/stop-ab/pipes-hooks/), and in 8 of 10 rounds of the latency
    benchmark (results/latency/pause-25ms/pipe-ab-*.md). A fixed order
    favours whoever runs first."""
    results = []
    for rep in range(repetitions):
        for case in cases:
            order = tuple(kinds(case, rep))
            for kind in order if rep % 2 == 0 else order[::-1]:
                label = path_label(kind)  # go:PATH names a binary
                d = Path(tempfile.mkdtemp(prefix=f"{name}-{case}-{label}-{rep}-", dir=tmp))
                prof = profile / f"{case}-{label}-{rep}" if profile else None
                rec = run(case, kind, d, prof)
                rec["repetition"] = rep
                results.append(rec)
                on_record(results)
                print(f"  {name} {case:12} {kind} rep {rep}: "
                      + (describe(rec) if rec["ok"] else f"FAILED {rec.get('error')}"), flush=True)
    return results


def record_failure(rec: dict, error: BaseException, failures_log: Path, title: str, logs: str) -> None:
    """Marks a benchmark record failed with the error and its traceback, and
    appends both with the run's logs to failures_log."""
    import traceback

    rec["ok"] = False
    rec["error"] = f"{type(error).__name__}: {error}"
    rec["traceback"] = traceback.format_exc()
    with failures_log.open("a") as f:
        f.write(f"=== {title}\n{rec['traceback']}\n{logs}\n")


def scrape_metrics(url: str, timeout: float = 10) -> dict[str, float]:
    """The samples of a Prometheus text page (a scheduler's /metrics): name,
    with its labels if any, -> value. Raises OSError when the page does not
    answer."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        text = r.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


class Scheduler:
    """`dask scheduler` (kind "py") or bin/dask-go-scheduler (kind "go"; kind
    "go:PATH" runs the Go binary at PATH, e.g. an older build to compare) on
    127.0.0.1 with a free port, configured through DASK_* variables."""

    def __init__(self, kind: str, env: dict[str, str], tmp: Path, log_level: str = "info",
                 profile: Path | None = None):
        self.kind, self.env, self.tmp = kind, env, Path(tmp)
        # profile: a directory for the Go process's CPU and heap profiles
        # (cpu.pprof; heap.pprof at exit, heap.pprof.N per SIGUSR1) and the
        # helper's cProfile of each graph (helper-PID-ID.prof)
        self.profile = Path(profile) if profile else None
        self.scheduler_file = self.tmp / "scheduler.json"
        self.log_path = self.tmp / "scheduler.log"
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None
        self.address = ""
        self.snapshots = 0  # heap profiles asked for (snapshot_heap)

    def command(self) -> list[str]:
        # the dashboard on a free port (pages off) for both, so that runs
        # never meet on :8787
        common = ["--host", "127.0.0.1", "--port", "0", "--scheduler-file", str(self.scheduler_file),
                  "--dashboard-address", "127.0.0.1:0"]
        if self.kind.startswith("go"):
            base = self.kind.split("+")[0]  # "go+tls": TLS comes from the environment (tls_env)
            binary = base[3:] if base.startswith("go:") else str(GO_SCHEDULER)
            prof = []
            if self.profile:
                prof = ["--cpu-profile", str(self.profile / "cpu.pprof"), "--heap-profile", str(self.profile / "heap.pprof")]
            # the dashboard's pages only for "+dash"/"+page" kinds (an older
            # build, go:PATH, may not know --no-dashboard)
            with_pages = base.startswith("go:") or "+dash" in self.kind or "+page" in self.kind
            pages = [] if with_pages else ["--no-dashboard"]
            return [binary, *common, *pages, "--python", sys.executable, "--log-level", self.log_level, *prof]
        return [str(VENV_BIN / "dask"), "scheduler", *common, "--no-dashboard"]

    def start(self, timeout: float = 60) -> "Scheduler":
        return self.launch().wait_ready(timeout)

    def launch(self) -> "Scheduler":
        """Start the process; workers started now wait for the scheduler file."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.scheduler_file.unlink(missing_ok=True)
        env = python_env(self.env)
        if self.profile:
            self.profile.mkdir(parents=True, exist_ok=True)
            env["DASKGO_HELPER_PROFILE_DIR"] = str(self.profile)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env)
        return self

    def wait_ready(self, timeout: float = 60) -> "Scheduler":
        def ready():
            try:
                return json.loads(self.scheduler_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                return None

        self.address = wait_for(ready, timeout, f"{self.kind} scheduler file", self.proc)
        return self

    def logs(self) -> str:
        return tail(self.log_path)

    def snapshot_heap(self, wait: bool = False) -> None:
        """Ask a profiled Go scheduler for a heap profile now; with wait,
        return once it is written (heap.pprof.N, then its goroutines file),
        so that what the caller does next is not in it."""
        if self.kind.startswith("go") and self.profile and self.proc is not None and self.proc.poll() is None:
            self.snapshots += 1
            self.proc.send_signal(signal.SIGUSR1)
            if wait:
                done = self.profile / f"heap.pprof.{self.snapshots}.goroutines"
                wait_for(lambda: done.exists(), 60, f"heap profile {self.snapshots}", self.proc)
                time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)


class Workers:
    """Stock `dask worker` processes, each with its nanny as users run them
    (nanny=False, used by the smoke mode, halves the processes to start)."""

    def __init__(self, tmp: Path, scheduler_file: Path, n: int, memory_limit: int, nthreads: int = 1,
                 nanny: bool = True, first: int = 0, env: dict | None = None):
        self.tmp, self.scheduler_file = Path(tmp), scheduler_file
        self.env = env
        self.n, self.memory_limit, self.nthreads, self.nanny = n, memory_limit, nthreads, nanny
        self.first = first  # names and logs are w{first}..w{first+n-1} (workers that join later)
        self.procs: list[subprocess.Popen] = []
        self.worker_pids: list[int] = []

    def start(self) -> "Workers":
        for i in range(self.first, self.first + self.n):
            with open(self.tmp / f"worker-{i}.log", "wb") as log:
                self.procs.append(subprocess.Popen(
                    [str(VENV_BIN / "dask"), "worker", "--scheduler-file", str(self.scheduler_file),
                     "--name", f"w{i}", "--nthreads", str(self.nthreads), "--host", "127.0.0.1",
                     "--no-dashboard", "--memory-limit", str(self.memory_limit),
                     "--local-directory", str(self.tmp / f"dask-w{i}"),
                     *([] if self.nanny else ["--no-nanny"])],
                    stdout=log, stderr=subprocess.STDOUT, env=python_env(self.env)))
        return self

    def check_alive(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"dask worker {p.pid} exited with {p.returncode}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{tail(p)}" for p in sorted(self.tmp.glob("worker-*.log")))

    def stop(self) -> None:
        for p in self.procs:  # all at once: each nanny takes a moment to close its worker
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            stop(p, grace=15)
        for pid in self.worker_pids:
            stop_pid(pid)
        self.procs.clear()


class ZeroWorkers:
    """One bin/dask-go-zero-worker process running n fake workers."""

    def __init__(self, tmp: Path, scheduler_file: Path, n: int, nthreads: int):
        self.tmp, self.scheduler_file, self.n, self.nthreads = Path(tmp), scheduler_file, n, nthreads
        self.first_task_file = self.tmp / "first-task.txt"
        self.log_path = self.tmp / "zero-worker.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "ZeroWorkers":
        from distributed.versions import get_versions

        versions = self.tmp / "versions.json"
        versions.write_text(json.dumps(get_versions()))
        self.first_task_file.unlink(missing_ok=True)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(ZERO_WORKER), "--scheduler-file", str(self.scheduler_file), "--workers", str(self.n),
                 "--nthreads", str(self.nthreads), "--versions", str(versions),
                 "--first-task-file", str(self.first_task_file)],
                stdout=log, stderr=subprocess.STDOUT)
        return self

    def first_task_time(self) -> float | None:
        try:
            return float(self.first_task_file.read_text())
        except (OSError, ValueError):
            return None

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"zero worker exited with {self.proc.returncode}:\n{tail(self.log_path)}")

    def logs(self) -> str:
        return tail(self.log_path)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)


def cpu_seconds(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


class Sampler:
    """Samples every `interval` seconds, from outside: the RSS of each worker
    process and their sum, and the scheduler's RSS and that of its children (the
    Go scheduler's materializer helper), apart and summed at each instant
    (the scheduler side's memory is the sum). Timestamps are relative to
    start()."""

    def __init__(self, worker_pids: list[int], scheduler_pid: int, interval: float = 0.1):
        self.workers = [psutil.Process(p) for p in worker_pids]
        self.scheduler = psutil.Process(scheduler_pid)
        self.interval = interval
        self.times: list[float] = []
        self.worker_rss: list[int] = []
        self.per_worker_rss: list[list[int]] = []  # each worker's RSS, same instants as worker_rss
        self.scheduler_rss: list[int] = []
        self.helper_rss: list[int] = []
        self.total_rss: list[int] = []  # scheduler + helper, same instant
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    @staticmethod
    def _rss_each(procs) -> list[int]:
        out = []
        for p in procs:
            try:
                out.append(p.memory_info().rss)
            except psutil.NoSuchProcess:
                out.append(0)
        return out

    @classmethod
    def _rss(cls, procs) -> int:
        return sum(cls._rss_each(procs))

    def sample(self) -> None:
        self.times.append(time.monotonic() - self.t0)
        each = self._rss_each(self.workers)
        self.per_worker_rss.append(each)
        self.worker_rss.append(sum(each))
        self.scheduler_rss.append(self._rss([self.scheduler]))
        try:
            helpers = self.scheduler.children(recursive=True)
        except psutil.NoSuchProcess:
            helpers = []
        self.helper_rss.append(self._rss(helpers))
        self.total_rss.append(self.scheduler_rss[-1] + self.helper_rss[-1])

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> "Sampler":
        self.t0 = time.monotonic()
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def largest_worker_peak(self) -> int:
        """The largest single worker's peak RSS over the run (its own
        peak, not its share of the cluster's summed peak)."""
        return max((max(col) for col in zip(*self.per_worker_rss)), default=0)

    def scheduler_cpu(self) -> tuple[float, float]:
        """CPU seconds (user+system) so far of the scheduler process, and of
        its children (the Go scheduler's materializer helper): the live ones
        plus those it has reaped (a helper replaced mid-run still counts)."""
        t = self.scheduler.cpu_times()
        own = t.user + t.system
        helpers = t.children_user + t.children_system
        for c in self.scheduler.children(recursive=True):
            try:
                helpers += cpu_seconds(c)
            except psutil.NoSuchProcess:
                pass
        return own, helpers


def tls_env(tmp: Path) -> dict[str, str]:
    """dask config, as DASK_* variables, that puts every process of a run on
    TLS: a CA and one certificate made here for the scheduler, worker and
    client roles, and require-encryption (so schedulers and workers listen
    on tls:// and refuse tcp://). Scheduler kinds ending in "+tls" use it."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    tmp.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dask")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .sign(ca_key, hashes.SHA256()))
    ca_path, cert_path, key_path = tmp / "tls-ca.pem", tmp / "tls-cert.pem", tmp / "tls-key.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    env = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
           "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(ca_path)}
    for role in ("SCHEDULER", "WORKER", "CLIENT"):
        env[f"DASK_DISTRIBUTED__COMM__TLS__{role}__CERT"] = str(cert_path)
        env[f"DASK_DISTRIBUTED__COMM__TLS__{role}__KEY"] = str(key_path)
    return env


class BrowserPage:
    """Headless Chromium with one page open (kind "+page": the dashboard's
    /status watched during a run), in a session of its own so that its
    helper processes stop with it."""

    def __init__(self, url: str, tmp: Path):
        import shutil

        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            raise RuntimeError("chromium is not installed (scripts/setup.sh installs it with apt-get)")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--mute-audio",
             f"--user-data-dir={tmp / 'chromium-profile'}", "--window-size=1400,1000", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(10)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
