"""One visit of a lent GPU machine, as one command (issue 41): what a visit measures and runs, prepared here.

    PYTHONPATH=$PWD python3 tools/gpu_visit.py --out $OUT --minutes 9.3

carrying the ``.gpu/data`` folders ``afl queue pack`` prints for this call (what earlier calls of a visit
unpacked stays in /tmp/afl-data on the warm machine).

In order, each step within its share of ``--minutes`` of wall time:
1. unpack the datasets carried in ``.gpu/data`` (``afl queue pack``), MD5-checked;
2. the CUDA tests of the engine and its recorded graphs (``tests/test_graphs.py``, ``tests/test_engine.py``);
3. ``tools/conv_wgrad_probe.py`` (the ways to compute a grouped convolution's weight gradient, alone), then
   ``afl bench local-sgd`` on cnn-cifar and resnet20, calls of 10 to 400 clients, float32 and bf16, graphs off and
   on (one JSON line each, in bench.jsonl; the card in every line), and a kernel profile of one call;
4. the fleet: FAVAS's paper-scale Table 2 as ``afl repro favas-table2 --seeds 10 --device cuda --processes 8``,
   timed end to end (``afl.queue.FLEET``; goal: under 60 s on an H100), then ``afl bench fleet --device cuda --json
   --processes 8`` (``--fleet-minutes`` for both);
5. a probe of the queue's first entries' end-to-end rate: GHBM's CIFAR-10 protocol for a few hundred rounds, FedAvg
   and FedHBM alone and as a fleet of both, which gives the rates the queue sizes its entries with;
6. ``afl queue run`` with the minutes left and those rates; an entry with no rate yet (FedAST's Fig. 7) has it
   measured there when its turn comes (a short run of the entry itself), added to rates.json.

Everything lands in ``--out`` (at most 8 files come back from a device call): visit.log (the caller's tee),
tests.log, bench.jsonl, profile.txt, the fleet's archive, rates.json (the probe's figures and the rates),
queue-report.json and the entries' archives: a call that runs the queue skips the steps before it. ``--cpu-test``
runs every step on the CPU with tiny settings (to check the script, not to measure anything).
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
    print(f"[visit {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def tests(out: Path, seconds: float, cpu: bool) -> bool:
    """The recorded graphs' tests (they gate the graphs: if one fails, the rest of the visit runs with
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
    # (model, clients, precision, graphs, steps, cuDNN's own tuning, weight gradient)
    plan = [("cnn-cifar", c, p, g, 8, False, w) for c in (10, 100, 400)
            for p, g, w in (("fp32", False, "cudnn"), ("fp32", True, "cudnn"), ("bf16", True, "cudnn"),
                            ("fp32", False, "matmul"), ("bf16", True, "matmul"))]
    plan += [("resnet20", 400, p, g, 4, False, w) for p, g, w in (("fp32", False, "cudnn"), ("bf16", True, "cudnn"),
                                                                  ("bf16", True, "matmul"))]
    plan += [("cnn-cifar", 400, "bf16", True, 8, True, "cudnn")]
    plan = [row for row in plan if graphs_ok or not row[3]]
    if cpu:
        plan = [("cnn-cifar", 2, "fp32", False, 2, False, "cudnn")]
    t_end = time.monotonic() + seconds
    with open(out / "bench.jsonl", "w") as f:
        from conv_wgrad_probe import probe as wgrad_probe
        for k in (2,) if cpu else (10, 100, 400):
            for row in wgrad_probe(k, torch.device(device)):
                f.write(json.dumps(row | {"probe": "conv weight gradient", "card": card}) + "\n")
                log(f"wgrad: {row}")
        for model, clients, precision, use_graphs, steps, cudnn_bench, wgrad in plan:
            if time.monotonic() > t_end:
                log(f"bench: out of time before {model} C={clients} {precision} graphs={use_graphs}")
                break
            torch.backends.cudnn.benchmark = cudnn_bench
            conv.MATMUL_WEIGHT_GRADIENT.clear()
            if wgrad == "matmul":
                conv.MATMUL_WEIGHT_GRADIENT.add(device)
            t0 = time.monotonic()
            try:
                rows = bench_local_sgd([model], clients=clients, steps=steps, device=device, reference=False,
                                       precision=precision, cuda_graphs=None if cpu else use_graphs)
            except Exception as error:  # noqa: BLE001 -- one failed setting is reported, the rest still run
                rows = [{"model": model, "clients": clients, "precision": precision, "cuda_graphs": use_graphs,
                         "error": repr(error)[:500]}]
            for row in rows:
                row |= {"card": card, "seconds": round(time.monotonic() - t0, 1)}
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
CPU_FLEET = ["--set", "total_time=100", "--device", "cpu", "--processes", "2"]


def fleet(out: Path, seconds: float, cpu: bool) -> None:
    """Issue 41's fleet figures, one line each in bench.jsonl with the card: :func:`table_in_processes`, then
    ``afl bench fleet --device cuda --json --processes 8`` (the quick grid one by one, as one fleet and in 8
    processes) in what is left of ``seconds``."""
    import torch
    card = "cpu" if cpu else torch.cuda.get_device_name(0)
    t_end = time.monotonic() + seconds
    row = table_in_processes(out, seconds, cpu)
    cmd = [sys.executable, "-m", "afl.cli", "bench", "fleet", "--json"] + (
        CPU_FLEET if cpu else ["--processes", "8", "--device", "cuda"])
    left = t_end - time.monotonic()
    with open(out / "bench.jsonl", "a") as f:
        f.write(json.dumps(row | {"card": card}) + "\n")
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


def table_in_processes(out: Path, seconds: float, cpu: bool) -> dict:
    """FAVAS's paper-scale Table 2 (210 runs) as ``afl repro favas-table2 --seeds 10 --device cuda --processes 8``
    (:data:`afl.queue.FLEET`; goal: under 60 s on an H100, 145 s on an H200), started fresh and timed end to end
    (process start-up, data loading and evaluations included) by the queue's runner, which stops it cleanly at the
    deadline and archives its folder into ``out``. Returns the figures: wall and CPU seconds, runs and client steps
    computed."""
    import resource
    import shutil
    from afl import queue
    argv = ["repro", "favas-table2", "--quick", "--seeds", "1", *CPU_FLEET] if cpu else None
    work = queue.scratch() / queue.FLEET.name
    shutil.rmtree(work, ignore_errors=True)              # a timing of the whole table, not of a resumed part
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = queue.run(queue.FLEET, seconds / 60, out, device="cpu" if cpu else "cuda", rates=queue.FLEET_RATES,
                       argv=argv, allow_partial=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    runs, steps = queue.computed(work, queue.FLEET.experiment)
    return {"probe": "fleet", "command": "afl " + " ".join(argv or queue.FLEET.argv), "wall_s": report["seconds"],
            "finished": report["finished"], "exit_code": report["exit_code"], "runs": runs, "client_steps": steps,
            "client_steps_per_s": round(steps / report["seconds"], 1),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "archive": Path(report["archive"]).name}


def probe(out: Path, cpu: bool) -> list[dict]:
    """GHBM's CIFAR-10 protocol (alpha = 0) for a few hundred rounds: end-to-end client-steps/s of FedAvg and FedHBM
    alone (10 clients a call) and of the headline's five methods as one fleet (50), the rates the queue's entries
    are sized with."""
    import torch
    from afl.repro import ghbm
    from afl.repro.runner import run_tasks
    rounds = 2 if cpu else 200
    cfg = ghbm.setting("ghbm-table2", quick=False, rounds=rounds, eval_every=1 if cpu else 20, last=1 if cpu else 20,
                       seeds=1, splits=("noniid",), test_samples=500 if cpu else None)
    device = "cpu" if cpu else "cuda"
    data = ghbm.load_task(cfg, device=device)
    measured = {}
    from afl.queue import HEADLINE
    for label, methods in (("fedavg", ["fedavg"]), ("fedhbm", ["fedhbm"]), ("fleet", list(HEADLINE))):
        tasks = [(m, lambda m=m: ghbm.compute_run(cfg, "noniid", m, None, 0, dataset=data, device=device))
                 for m in methods]
        t0 = time.perf_counter()
        outcomes = run_tasks(tasks, fleet=True)
        if not cpu:
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        steps = sum(o.value["computed_client_steps"] for o in outcomes if o.ok)
        errors = [repr(o.error)[:300] for o in outcomes if not o.ok]
        measured[label] = {"methods": methods, "rounds": rounds, "seconds": round(wall, 2), "client_steps": steps,
                           "client_steps_per_s": round(steps / wall, 1), "errors": errors}
        log(f"probe: {label}: {measured[label]}")
    card = "cpu" if cpu else torch.cuda.get_device_name(0)
    single = min(measured["fedavg"]["client_steps_per_s"], measured["fedhbm"]["client_steps_per_s"])
    rates = [{"model": "cnn-cifar", "clients": 10, "rate": single,
              "basis": f"measured in a visit on {card}: GHBM's CIFAR-10 protocol, {rounds} rounds end to end, the "
                       f"slower of FedAvg and FedHBM alone (tools/gpu_visit.py)"},
             {"model": "cnn-cifar", "clients": 50, "rate": measured["fleet"]["client_steps_per_s"],
              "basis": f"measured in a visit on {card}: the headline's five methods as one fleet, {rounds} rounds"}]
    (out / "rates.json").write_text(json.dumps({"rates": rates, "probe": measured}, indent=1))
    return rates


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--minutes", type=float, default=9.3, help="wall minutes of the whole visit")
    p.add_argument("--bench-minutes", type=float, default=1.75)
    p.add_argument("--cpu-test", action="store_true", help="every step on the CPU, tiny (checks the script)")
    p.add_argument("--fleet-minutes", type=float, default=4.0)
    p.add_argument("--skip", nargs="*", default=[],
                   choices=["tests", "bench", "profile", "fleet", "probe", "queue"])
    args = p.parse_args(argv)
    t_end = time.monotonic() + args.minutes * 60
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("AFL_CACHE", "/tmp/afl-cache")
    pack = REPO / ".gpu" / "data"
    if pack.is_dir():
        from afl.queue import unpack
        os.environ["AFL_DATA"] = str(unpack(pack, Path("/tmp/afl-data")))
        log(f"data unpacked and checked: {os.environ['AFL_DATA']}")
    if "tests" not in args.skip and not tests(out, 150, args.cpu_test):
        os.environ["AFL_CUDA_GRAPHS"] = "0"
        log("the graphs' tests failed: the rest of this visit runs with AFL_CUDA_GRAPHS=0")
    if "bench" not in args.skip:
        bench(out, args.bench_minutes * 60, args.cpu_test)
    if "profile" not in args.skip:
        try:
            profile(out, args.cpu_test)
            log("profile: written")
        except Exception as error:  # noqa: BLE001
            log(f"profile failed: {error!r}")
    if "fleet" not in args.skip:
        fleet(out, args.fleet_minutes * 60, args.cpu_test)
    rates_file = None
    if "probe" not in args.skip:
        probe(out, args.cpu_test)
        rates_file = out / "rates.json"
    if "queue" in args.skip or args.cpu_test:
        return 0
    left = (t_end - time.monotonic()) / 60
    log(f"queue: {left:.1f} minutes left")
    cmd = [sys.executable, "-m", "afl.cli", "queue", "run", "--minutes", f"{left:.2f}", "--out", str(out),
           "--allow-partial"]
    if rates_file is not None:
        cmd += ["--rates", str(rates_file)]
    return subprocess.run(cmd, cwd=REPO).returncode


if __name__ == "__main__":
    sys.exit(main())
