"""A GPU job with a time limit (a Slurm allocation, a Colab session), as one command: what afl measures on a GPU
and then the plan's paper-scale runs in the time left.

    PYTHONPATH=$PWD python3 tools/gpu_job.py --out OUT --minutes 9.3 [--packed DIR --data-root DIR]
        [--max-file-mb 16 --max-files 6 --max-total-mb 60]

In order, each step within its share of ``--minutes`` of wall time:

1. with ``--packed`` (a folder ``afl data pack`` wrote), unpack it into ``--data-root``, MD5-checked;
2. the CUDA tests of the engine and its recorded graphs (a failing graph test turns the graphs off for the job);
3. ``tools/conv_wgrad_probe.py`` (the ways to compute a grouped convolution's weight gradient, alone), then
   ``afl bench local-sgd`` on cnn-cifar and resnet20, calls of 10 to 400 clients, float32 and bf16, cuDNN's weight
   gradient and the batched matmul, graphs off and on (``bench.jsonl``: card, torch, precision and clients per
   call in every line), and a kernel profile of one call (``profile.txt``);
4. the fleet: FAVAS's paper-scale Table 2 as ``afl repro favas-table2 --seeds 10 --device cuda --processes 8``,
   timed end to end (goal: under 60 s on an H100), then ``afl bench fleet --device cuda --json --processes 8``;
5. the end-to-end rate of GHBM's CIFAR-10 protocol: ``afl repro ghbm-table2`` for 200 rounds, the headline's five
   methods as one fleet (its result is a source of ``results/measurements/rates.json``);
6. ``afl plan run`` with the minutes left (``--time-limit``; runs on rounds keep their checkpoints), then ``afl plan
   archive`` into ``--out`` within the caller's limits on what may be kept (``--max-file-mb``, ``--max-files``,
   ``--max-total-mb``; none by default).

Everything lands in ``--out``: tests.log, bench.jsonl, profile.txt, the fleet's and the rate's results, the plan's
archives and plan-report.json. ``--cpu-test`` runs every step on the CPU with tiny settings (to check the script,
not to measure anything).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))


def log(msg: str) -> None:
    print(f"[gpu job {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def tests(out: Path, seconds: float, cpu: bool) -> bool:
    """The recorded graphs' tests (they gate the graphs: if one fails, the rest of the job runs with
    ``AFL_CUDA_GRAPHS=0``), then the engine's other CUDA tests; both logs in tests.log."""
    suites = [["tests/test_graphs.py"],
              ["tests/test_engine.py", "tests/test_fleet.py", "tests/test_conv.py", "-k", "cuda or gpu"]]
    codes = []
    with open(out / "tests.log", "w") as f:
        for select in suites[:1] if cpu else suites:
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *select]
            f.write(f"$ {' '.join(cmd)}\n")
            f.flush()
            try:
                codes.append(subprocess.run(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                                            timeout=seconds / 2).returncode)
            except subprocess.TimeoutExpired:
                codes.append("timeout")
    last = (out / "tests.log").read_text().strip().splitlines()[-1:]
    log(f"tests: exit codes {codes} (graphs; engine, fleet, convolutions): {last}")
    return codes[0] == 0


def bench(out: Path, seconds: float, cpu: bool) -> None:
    import torch
    from afl import graphs
    from afl.bench import bench_local_sgd
    device = "cpu" if cpu else "cuda"
    card = "cpu" if cpu else torch.cuda.get_device_name(0)
    from afl import conv
    graphs_ok = os.environ.get("AFL_CUDA_GRAPHS", "1") == "1"
    # (model, clients, precision, graphs, steps, cuDNN's own tuning, weight gradient): the targets' rows (400
    # clients a call) first, so that a job short of time still measures them, then 100 and 10 clients
    cnn = (("bf16", True, "cudnn"), ("bf16", True, "matmul"), ("fp32", True, "cudnn"), ("fp32", True, "matmul"),
           ("bf16", True, "auto"), ("fp32", False, "cudnn"), ("fp32", True, "auto"), ("fp32", False, "matmul"))
    resnet = (("bf16", True, "cudnn"), ("bf16", True, "matmul"), ("bf16", True, "auto"), ("fp32", False, "cudnn"))
    plan = []
    for c in (400, 100, 10):
        plan += [("cnn-cifar", c, p, g, 8, False, w) for p, g, w in cnn]
        plan += [("resnet20", c, p, g, 4, False, w) for p, g, w in resnet]
        if c == 400:
            plan += [("cnn-cifar", 400, "bf16", True, 8, True, "cudnn")]
    plan = [row for row in plan if graphs_ok or not row[3]]
    if cpu:
        plan = [("cnn-cifar", 2, "fp32", False, 2, False, "cudnn")]
    t_end = time.monotonic() + seconds
    with open(out / "bench.jsonl", "w") as f:
        from conv_wgrad_probe import probe as wgrad_probe
        for layer in ("conv1", "conv2"):          # conv1 first: the H200 profile's per-client kernel
            for k in (2,) if cpu else (10, 100, 400):
                for row in wgrad_probe(k, torch.device(device), layer):
                    f.write(json.dumps(row | {"probe": "conv weight gradient", "card": card,
                                              "torch": torch.__version__}) + "\n")
                    log(f"wgrad: {row}")
        for model, clients, precision, use_graphs, steps, cudnn_bench, wgrad in plan:
            if time.monotonic() > t_end:
                log(f"bench: out of time before {model} C={clients} {precision} graphs={use_graphs}")
                break
            torch.backends.cudnn.benchmark = cudnn_bench
            conv.MATMUL_WEIGHT_GRADIENT.clear()
            conv.MEASURED_WEIGHT_GRADIENT.clear()
            conv.CHOICES.clear()
            if wgrad in ("matmul", "auto"):
                conv.MATMUL_WEIGHT_GRADIENT.add(device)
            if wgrad == "auto":
                conv.MEASURED_WEIGHT_GRADIENT.add(device)
            t0 = time.monotonic()
            try:
                rows = bench_local_sgd([model], clients=clients, steps=steps, device=device, reference=False,
                                       precision=precision, cuda_graphs=None if cpu else use_graphs)
            except Exception as error:  # noqa: BLE001 -- one failed setting is reported, the rest still run
                rows = [{"model": model, "clients": clients, "precision": precision, "cuda_graphs": use_graphs,
                         "error": repr(error)[:500]}]
            chosen = {str(key): way for key, (way, _) in conv.CHOICES.items()}   # auto: each layer's way
            for row in rows:
                row |= {"card": card, "torch": torch.__version__, "weight_gradient": wgrad,
                        "seconds": round(time.monotonic() - t0, 1)} | ({"choices": chosen} if chosen else {})
                f.write(json.dumps(row) + "\n")
                f.flush()
                log(f"bench: {model} C={clients} {precision} graphs={row.get('cuda_graphs')} weight gradient={wgrad} "
                    f"cudnn.benchmark={cudnn_bench}: {row.get('engine_steps_per_s', row.get('error'))}")
            graphs._BY_STRUCTURE.clear()          # each setting's graphs and memory go before the next
            if not cpu:
                torch.cuda.empty_cache()
    torch.backends.cudnn.benchmark = False
    conv.MATMUL_WEIGHT_GRADIENT.clear()
    conv.MATMUL_WEIGHT_GRADIENT.update(conv._matmul_devices())
    conv.MEASURED_WEIGHT_GRADIENT.clear()


def profile(out: Path, cpu: bool) -> None:
    """The kernels of one 100-client call of cnn-cifar (bf16, eager): where a step's time goes on the device."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile
    from afl.bench import local_sgd_case
    from afl.engine import LocalSGD
    from afl.jobs import JobQueue
    from afl.streams import ClientStreams
    device = "cpu" if cpu else "cuda"
    module, dataset, parts, batch = local_sgd_case("cnn-cifar", 2 if cpu else 100, device)
    engine = LocalSGD(module, dataset, batch, precision="fp32" if cpu else "bf16", cuda_graphs=False)
    queue = JobQueue(engine, ClientStreams(parts, batch, seed=0))
    start = engine.model.flatten().to(engine.device)

    def call():
        jobs = [queue.submit(c, start, 2 if cpu else 8, 0.05) for c in range(len(parts))]
        jobs[0].result()
    call()
    activities = [ProfilerActivity.CPU] + ([] if cpu else [ProfilerActivity.CUDA])
    with torch_profile(activities=activities) as prof:
        call()
        if not cpu:
            torch.cuda.synchronize()
    sort = "self_cpu_time_total" if cpu else "self_cuda_time_total"
    (out / "profile.txt").write_text(prof.key_averages().table(sort_by=sort, row_limit=30, max_name_column_width=70))


#: what the fleet step runs on the CPU instead (``--cpu-test``): FAVAS's quick grid, 100 time units, 2 processes
CPU_FLEET = ["--quick", "--seeds", "1", "--set", "total_time=100", "--device", "cpu", "--processes", "2"]
#: the fleet figure's command (issue 41: under 60 s on one H100; 135 s on an H200, results/measurements/h200-2026-11-27)
FLEET = ["--seeds", "10", "--device", "cuda", "--processes", "8"]


def timed_repro(argv: list[str], out: Path, seconds: float) -> dict:
    """``afl repro ARGV --out OUT --time-limit SECONDS`` started fresh, timed end to end (process start-up, data and
    evaluations included): wall and CPU seconds, exit code, runs and client steps of its result."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    code = subprocess.run([sys.executable, "-m", "afl.cli", "repro", *argv, "--out", str(out), "--fresh",
                           "--time-limit", f"{max(seconds, 1):.0f}s"], cwd=REPO).returncode
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    results = list(out.glob("*.json"))
    runs = json.loads(results[0].read_text())["runs"] if results else []
    steps = sum(sum(t["client_steps"] for t in r["tasks"]) if "tasks" in r else r["computed_client_steps"]
                for r in runs)
    return {"command": "afl repro " + " ".join(argv), "wall_s": round(wall, 1), "exit_code": code,
            "finished": code == 0, "runs": len(runs), "client_steps": steps,
            "client_steps_per_s": round(steps / wall, 1),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1)}


def fleet(out: Path, seconds: float, cpu: bool) -> None:
    """Issue 41's fleet figures, one line each in bench.jsonl with the card: FAVAS's Table 2 in 8 processes, timed
    end to end (its result in ``out/favas-table2-processes``), then ``afl bench fleet --device cuda --json
    --processes 8`` (the quick grid one by one, as one fleet and in 8 processes) in what is left of ``seconds``."""
    import torch
    card = "cpu" if cpu else torch.cuda.get_device_name(0)
    t_end = time.monotonic() + seconds
    row = timed_repro(["favas-table2", *(CPU_FLEET if cpu else FLEET)], out / "favas-table2-processes", seconds)
    cmd = [sys.executable, "-m", "afl.cli", "bench", "fleet", "--json"] + (
        ["--set", "total_time=100", "--processes", "2"] if cpu else ["--processes", "8", "--device", "cuda"])
    left = t_end - time.monotonic()
    with open(out / "bench.jsonl", "a") as f:
        f.write(json.dumps(row | {"probe": "fleet", "card": card, "torch": torch.__version__}) + "\n")
        log(f"fleet: {row}")
        if left < 30:
            log(f"fleet: no time left for {' '.join(cmd[3:])}")
            return
        try:
            done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=left)
            rows = ([json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
                    or [{"error": f"exit code {done.returncode}: {done.stderr[-500:]}"}])
        except subprocess.TimeoutExpired:
            rows = [{"error": f"not finished in {left:.0f} s"}]
        for line in rows:
            f.write(json.dumps(line | {"probe": "bench fleet", "command": " ".join(cmd[3:]), "card": card}) + "\n")
            log(f"bench fleet: {line}")


#: seconds a plan's run still computing past its limit is given before it stops at once (``AFL_TIME_LIMIT_GRACE``)
PLAN_GRACE_S = 30.0

#: GHBM's CIFAR-10 protocol for the end-to-end rate: the headline's five methods as one fleet, 200 rounds
GHBM_RATE = {"splits": "noniid", "methods": "fedavg,fedcm,ghbm,localghbm,fedhbm", "rounds": 200, "eval_every": 20}
#: what ``--cpu-test`` changes of it (a tiny run)
GHBM_CPU_TEST = {"rounds": 2, "eval_every": 1, "last": 1, "test_samples": 500}


def ghbm_rate(out: Path, seconds: float, cpu: bool) -> None:
    """The end-to-end rate of GHBM's CIFAR-10 protocol (``out/ghbm-cifar10-rate``, a source for rates.json)."""
    sets = GHBM_RATE | (GHBM_CPU_TEST if cpu else {})
    argv = ["ghbm-table2", "--seeds", "1", *[a for k, v in sets.items() for a in ("--set", f"{k}={v}")],
            "--device", "cpu" if cpu else "cuda"]
    row = timed_repro(argv, out / "ghbm-cifar10-rate", seconds)
    with open(out / "bench.jsonl", "a") as f:
        f.write(json.dumps(row | {"probe": "ghbm end to end"}) + "\n")
    log(f"ghbm rate: {row}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--minutes", type=float, default=9.3, help="wall minutes of the whole job")
    p.add_argument("--bench-minutes", type=float, default=3.0)
    p.add_argument("--fleet-minutes", type=float, default=2.5)
    p.add_argument("--rate-minutes", type=float, default=1.5)
    p.add_argument("--packed", default=None, help="a folder afl data pack wrote, to unpack first")
    p.add_argument("--data-root", default=None, help="where --packed is unpacked (then the job's data root)")
    p.add_argument("--work", default=None, help="where the plan's runs write (default: OUT/plan)")
    p.add_argument("--max-file-mb", default=None, help="afl plan archive: no archive larger than this")
    p.add_argument("--max-files", default=None, help="afl plan archive: at most this many archives")
    p.add_argument("--max-total-mb", default=None, help="afl plan archive: at most this much together")
    p.add_argument("--jobs", nargs="*", default=[], metavar="JOB",
                   help="plan: run these of the plan's jobs, in this order (afl plan names them; default: the plan's "
                        "order)")
    p.add_argument("--leave-to-cpu", type=float, default=4.0,
                   help="plan: pass over the jobs a measured CPU finishes within this many hours (default: 4)")
    p.add_argument("--cpu-test", action="store_true", help="every step on the CPU, tiny (checks the script)")
    p.add_argument("--skip", nargs="*", default=[], choices=["tests", "bench", "profile", "fleet", "rate", "plan"])
    args = p.parse_args(argv)
    t_end = time.monotonic() + args.minutes * 60
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.packed:
        if not args.data_root:
            p.error("--packed needs --data-root (where to unpack it)")
        from afl.data.packing import unpack
        os.environ["AFL_DATA"] = str(unpack(Path(args.packed), Path(args.data_root)))
        log(f"data unpacked and checked: {os.environ['AFL_DATA']}")
    if "tests" not in args.skip and not tests(out, 150, args.cpu_test):
        os.environ["AFL_CUDA_GRAPHS"] = "0"
        log("the graphs' tests failed: the rest of this job runs with AFL_CUDA_GRAPHS=0")
    if "bench" not in args.skip:
        bench(out, args.bench_minutes * 60, args.cpu_test)
    if "profile" not in args.skip:
        try:
            profile(out, args.cpu_test)
            log("profile: written")
        except Exception as error:  # noqa: BLE001 -- the job goes on without it
            log(f"profile failed: {error!r}")
    if "fleet" not in args.skip:
        fleet(out, args.fleet_minutes * 60, args.cpu_test)
    if "rate" not in args.skip:
        ghbm_rate(out, args.rate_minutes * 60, args.cpu_test)
    if "plan" in args.skip:
        return 0
    # half a minute to archive, and the grace a run still computing past the limit is given (afl.deadline)
    left = (t_end - time.monotonic()) / 60 - 0.5 - PLAN_GRACE_S / 60
    work = Path(args.work or out / "plan")
    log(f"plan: {left:.1f} minutes left")
    run = [sys.executable, "-m", "afl.cli", "plan", "run", *args.jobs, "--time-limit", f"{max(left, 0.1):.2f}m",
           "--out", str(work), "--device", "cpu" if args.cpu_test else "cuda"]
    if not args.cpu_test:
        run += ["--leave-to-cpu", str(args.leave_to_cpu)]
    code = subprocess.run(run, cwd=REPO, env=os.environ | {"AFL_TIME_LIMIT_GRACE": str(PLAN_GRACE_S)}).returncode
    limits = [a for flag, v in (("--max-file-mb", args.max_file_mb), ("--max-files", args.max_files),
                                ("--max-total-mb", args.max_total_mb)) if v is not None for a in (flag, v)]
    subprocess.run([sys.executable, "-m", "afl.cli", "plan", "archive", "--out", str(work), "--to", str(out),
                    *limits], cwd=REPO)
    return code


if __name__ == "__main__":
    sys.exit(main())
