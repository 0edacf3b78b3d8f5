"""The afl command line: reproduce the papers' tables and figures, run the demo, benchmark the engine, list the
models and algorithms, and check the datasets. Every bad argument is reported as "afl: error: <what>" with
exit status 2, never as a traceback."""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys

from . import deadline
from .deadline import TimeLimit


def _models(args) -> None:
    from .models import describe_models
    rows = describe_models()
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'model':<12} {'parameters':>12}  input          source")
    for r in rows:
        print(f"{r['name']:<12} {r['parameters']:>12,}  {str(r['input_shape']):<14} {r['source']}")


def _algorithms(args) -> None:
    from dataclasses import fields
    from .algorithms import REGISTRY
    rows = [{"name": a.name, "summary": a.summary,
             "settings": {f.name: f.default for f in fields(a.settings)}} for a in REGISTRY.values()]
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
        return
    for r in rows:
        print(f"{r['name']}: {r['summary']}")
        print("    " + ", ".join(f"{k}={v!r}" for k, v in r["settings"].items()))


def _data(args) -> int:
    """verify/download: check every named dataset (each reported, none skipped); status 2 if any is missing or
    corrupt. pack/unpack: datasets for a machine without internet (:mod:`afl.data.packing`)."""
    from pathlib import Path
    from .data.files import locate
    from .errors import ChecksumError, DataMissingError, ParameterError
    if args.action in ("pack", "unpack"):
        from .data import packing
        if args.to is None:
            raise ParameterError("--to", None, f"the folder to {args.action} into (afl picks none for you)")
        if args.action == "pack":
            files = packing.pack(args.names, Path(args.to), root=args.root)
            size = sum(f.stat().st_size for f in files)
            print(f"packed {', '.join(args.names)}: {len(files)} file(s), {size / 1e6:.1f} MB in {args.to} "
                  f"('afl data unpack {args.to} --to DATA_ROOT' unpacks and checks them)")
            return 0
        if len(args.names) != 1:
            raise ParameterError("folder", " ".join(args.names), "one folder written by afl data pack")
        root = packing.unpack(Path(args.names[0]), Path(args.to))
        print(f"unpacked {args.names[0]} into {root}, every MD5 checked (use it as AFL_DATA={root} or --root {root})")
        return 0
    failed = 0
    for name in args.names:
        try:
            found = locate(name, root=args.root, download=args.action == "download", fresh=True)
            print(f"{name}: ok, {len(found.md5)} file(s) in {found.root}, MD5 recomputed and verified")
        except (DataMissingError, ChecksumError, ParameterError) as err:
            failed += 1
            print(f"{name}: FAILED\n  " + str(err).replace("\n", "\n  "))
    if failed:
        print(f"afl: error: {failed} of {len(args.names)} dataset(s) missing or corrupt", file=sys.stderr)
    return 2 if failed else 0


def _bench(args) -> None:
    if args.what == "fleet":
        from .bench import bench_fleet
        row = bench_fleet(args.grid, quick=not args.paper, seeds=args.seeds, device=args.device, root=args.root,
                          fleet_size=args.fleet_size, overrides=_overrides(args.overrides),
                          processes=args.processes)
        if args.json:
            print(json.dumps(row))
            return
        print(f"{row['grid']}: {row['runs']} runs on {row['device']} ({row['threads']} threads), "
              f"{row['client_steps']:,} client steps\n"
              f"  one by one {row['sequential_s']:8.1f} s  {row['sequential_client_steps_per_s']:8.0f} client steps/s"
              f"  {row['sequential_engine_calls']:7,} engine calls\n"
              f"  fleet      {row['fleet_s']:8.1f} s  {row['fleet_client_steps_per_s']:8.0f} client steps/s"
              f"  {row['fleet_engine_calls']:7,} engine calls\n"
              f"  speedup {row['speedup']:.2f}x; largest final-accuracy gap between the two: "
              f"{100 * row['max_final_accuracy_gap']:.2f} points\n"
              f"  compute bound: {row['peak_client_steps_per_s']:.0f} client steps/s at the fp32 matmul peak "
              f"({row['flops_per_client_step'] / 1e6:.1f} MFLOP a step), so at most {row['speedup_bound']:.2f}x")
        if row["engine_only_speedup"] is not None:
            print(f"  in the engine: {row['sequential_engine_s']:.1f} s one by one, {row['fleet_engine_s']:.1f} s as "
                  f"a fleet; with nothing outside it the fleet would be {row['engine_only_speedup']:.2f}x")
        if args.processes is not None:
            print(f"  {args.processes} fleets in {args.processes} processes {row['processes_s']:8.1f} s  "
                  f"{row['processes_client_steps_per_s']:8.0f} client steps/s, speedup "
                  f"{row['processes_speedup']:.2f}x over one by one")
        return
    from .bench import bench_local_sgd
    rows = []
    for clients in args.clients:
        rows += bench_local_sgd(args.models, clients=clients, steps=args.steps, device=args.device,
                                root=args.root, reference=not args.no_reference, strategy=args.strategy,
                                precision=args.precision, cuda_graphs={"on": True, "off": False}.get(args.cuda_graphs),
                                processes=args.processes)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    for r in rows:
        ref = f"{r['reference_steps_per_s']:.0f}" if r["reference_steps_per_s"] else "-"
        spd = f"{r['speedup']:.0f}x" if r["speedup"] else "-"
        graphs = "" if r["cuda_graphs"] == "off" and r["device"] == "cpu" else f" graphs {r['cuda_graphs']}"
        print(f"{r['model']:<10} {r['device']:<5} {r['strategy']:<5} {r['precision']}{graphs} C={r['clients']:<5} "
              f"reference {ref:>6} steps/s  "
              f"engine {r['engine_steps_per_s']:>8.0f} steps/s  speedup {spd:>6}  "
              f"{r['engine_gflops']:.1f} GFLOP/s = {100 * r['fraction_of_peak']:.0f}% of "
              f"{r['peak_gflops']:.0f} peak")
        if "processes" in r:
            print(f"{'':<10} {r['processes']} engines side by side, {r['threads_per_process']} thread(s) each: "
                  f"{r['processes_engine_steps_per_s']:.0f} steps/s together, {r['processes_speedup']:.2f}x one "
                  f"process with every thread ({r['one_process_engine_steps_per_s']:.0f}, timed alike)")


def _demo(args) -> None:
    from .demo import run_demo
    for p in run_demo(out=args.out, quick=args.quick, root=args.root, seed=args.seed):
        print(f"wrote {p}")


def _repro(args) -> None:
    from pathlib import Path
    from .errors import ParameterError
    from .repro import canonical_out, replot, report, run_experiment
    if args.out is None:                   # the experiment's own folder (GHBM's Table 2: by the dataset it is set to)
        args.out = canonical_out(args.experiment, quick=args.quick, **_overrides(args.overrides))
    if not args.out.strip():
        raise ParameterError("--out", args.out, "a folder name (an empty one would write into the current folder)")
    if args.root is not None and not Path(args.root).is_dir():
        raise ParameterError("--root", args.root, "a folder of datasets (it does not exist, or is not a folder)")
    if args.fresh and args.resume:
        raise ParameterError("--fresh", True, "either --fresh (discard saved runs) or --resume, not both")
    if args.replot:
        out = replot(args.experiment, args.out)
    else:
        from .fleet import ray_address
        overrides = _overrides(args.overrides)
        seeds = args.seeds
        if "seeds" in overrides:                   # --set seeds=N is --seeds N
            if seeds is not None and overrides["seeds"] != seeds:
                raise ParameterError("--set seeds", overrides["seeds"],
                                     f"the value of --seeds ({seeds}), or one of the two")
            seeds = overrides.pop("seeds")
        if args.time_limit is not None:
            deadline.start(deadline.parse(args.time_limit))
        with deadline.stop_on_signals():
            out = run_experiment(args.experiment, quick=args.quick, seeds=seeds, out=args.out, root=args.root,
                                 device=args.device, fresh=args.fresh, reuse=args.reuse, fleet=not args.no_fleet,
                                 fleet_size=args.fleet_size, ray=ray_address(args.ray), processes=args.processes,
                                 allow_large=args.allow_large, **overrides)
    print(report(json.loads(out[0].read_text()), per_run=False))
    print()
    for p in out:
        print(f"wrote {p}")


def _verdicts(args) -> int:
    """``afl verdicts FILE...``: a class's recorded check verdicts, one row per student."""
    import json
    from .exercises import verdicts
    table = verdicts.tally(verdicts.read(args.files))
    if args.json:
        print(json.dumps({u: {e: {"status": s, "checks": n} for e, (s, n) in row.items()} for u, row in table.items()},
                         indent=1, sort_keys=True))
    else:
        print(verdicts.markdown(table), end="")
    return 0


def _report(args) -> int:
    """``afl report``: write the scoreboard from the committed results (``--check``: only say which file is stale)."""
    from pathlib import Path
    from . import scoreboard
    from .checkpoint import kept_words
    from .repro import repo_root
    root = Path(args.root) if args.root else repo_root()
    if args.json:
        print(scoreboard.board_json(root))
        return 0
    if args.check:
        stale = scoreboard.stale(root)
        for path in stale:
            print(f"{path.relative_to(root.resolve())} is stale: run `afl report` and commit it", file=sys.stderr)
        return 1 if stale else 0
    for path, changed in scoreboard.write(root):
        print(f"{'wrote' if changed else 'unchanged'} {path.relative_to(root.resolve())}")
    return 0


def _plan(args) -> int:
    """``afl plan``: the paper-scale runs the scoreboard lacks; ``run`` them under a time limit; ``archive`` them."""
    from pathlib import Path
    from . import plan
    from .deadline import parse
    from .checkpoint import kept_words
    from .repro import repo_root
    root = Path(args.root) if args.root else repo_root()
    if args.action == "archive":
        if not args.out or not args.to:
            raise ValueError("afl plan archive needs --out (the folder afl plan run wrote) and --to (where the "
                             "archives go)")
        written = plan.archive(Path(args.out), Path(args.to), args.max_file_mb, args.max_files, args.max_total_mb)
        for path in written:
            print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
        return 0
    if args.action == "run":
        if not args.out or not args.time_limit:
            raise ValueError("afl plan run needs --out (the job's folder, the same in the next job) and --time-limit")
        out = Path(args.out)
        if args.resume_from:
            plan.unpack_results(Path(args.resume_from), out)
        chosen = plan.find(root, args.jobs) if args.jobs else plan.jobs(root)
        reports = plan.run(chosen, out, parse(args.time_limit), device=args.device, root=root,
                           data_root=args.data_root, leave_to_cpu=args.leave_to_cpu, processes=args.processes)
        plan.write_report(reports, out / "plan-report.json")
        finished = [r for r in reports if r["state"] == "finished"]
        if finished:
            print("to commit: copy each finished folder's result (its .json, .md, .png) to the same place under "
                  f"results/, e.g. cp {finished[0]['folder']}/*.json {finished[0]['folder']}/*.md ... ")
        return 0 if all(r["exit_code"] in (0, 3) for r in reports) else 1
    rows = plan.listing(root, cpu_hours=args.cpu_hours)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        costs = "; ".join(f"{m}: {c['minutes']:,.1f} min" if c else f"{m}: no rate measured"
                          for m, c in r["minutes"].items())
        more = f" ({r['gradients_at_most']:,} gradients)" if r["gradients_at_most"] != r["client_steps_at_most"] else ""
        print(f"{'HEADLINE ' if r['headline'] else ''}{r['name']}: {len(r['claims'])} claim(s) "
              f"({', '.join(sorted(set(r['why'])))}), at most {r['client_steps_at_most']:,} client steps{more}; {costs}"
              f"{'; fits the CPU in ' + str(args.cpu_hours) + ' h' if r['fits_cpu'] else ''}\n    {r['command']}")
        if r["under_way"]:
            print(f"    under way: {len(r['under_way'])} run(s) with checkpoints in {r['dest']} (the command goes on "
                  f"from them: {kept_words([tuple(k) for k in r['under_way']])})")
    sources = {(m, c["rate_of"]): (c["rate"], c["measured"], c["source"]) for r in rows
               for m, c in r["minutes"].items() if c}
    print("\nrates (client-steps/s), each measured by its source:")
    for (machine, key), (rate, what, source) in sorted(sources.items()):
        print(f"  {key} on {machine}: {rate:,.1f} ({source}: {what})")
    return 0


def _overrides(texts: list[str]) -> dict:
    """The ``--set FIELD=VALUE`` options as ``{field: value}`` (:func:`_override`); a field given twice is an error."""
    from .errors import ParameterError
    overrides = {}
    for field, value in map(_override, texts):
        if field in overrides:
            raise ParameterError(f"--set {field}", value, f"one value per field (it was also given as "
                                 f"{overrides[field]!r})")
        overrides[field] = value
    return overrides


def _override(text: str) -> tuple[str, object]:
    """``"target=0.8"`` -> ``("target", 0.8)``: the value as a Python literal (numbers, None, tuples; ``true``,
    ``false`` and ``none`` in any case too); else a comma-separated list as a tuple of words
    (``methods=fedbuff,qafel_c4_s4``), else the text itself."""
    import ast
    from .errors import ParameterError
    field, sep, value = text.partition("=")
    if not sep or not field.strip():
        raise ParameterError("--set", text, "FIELD=VALUE, e.g. target=0.8")
    field, value = field.strip(), value.strip()
    words = {"true": True, "false": False, "none": None}
    if value.lower() in words:
        return field, words[value.lower()]
    try:
        return field, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        if "," in value:
            return field, tuple(w.strip() for w in value.split(",") if w.strip())
        return field, value


def _interrupted(args, why: str = "interrupted") -> str:
    """What was kept when Ctrl-C (or the time limit: ``why``) stopped a command, and how to go on."""
    if getattr(args, "command", None) != "repro":
        return f"afl: {why}"
    from pathlib import Path
    from .checkpoint import kept_runs, kept_words
    from .results import PartialRuns
    partial = PartialRuns(Path(args.out) / f"{args.experiment}.partial.jsonl", key="")
    checkpoints = Path(args.out) / f"{args.experiment}.checkpoints"
    kept = kept_runs(checkpoints)
    stopped = f", and {len(kept)} stopped run(s) have checkpoints in {checkpoints} ({kept_words(kept)})" if kept else ""
    return (f"afl: {why}; {partial.count()} finished run(s) are saved in {partial.path}{stopped}. Run the "
            f"same command again to resume from them; add --fresh to start over.")


def build_parser() -> argparse.ArgumentParser:
    from .repro import EXPERIMENTS
    p = argparse.ArgumentParser(prog="afl", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    m = sub.add_parser("models", help="list the model zoo with parameter counts",
                       description="Every network afl builds, its parameter count, input shape and source.")
    m.add_argument("--json", action="store_true", help="print JSON instead of a table")
    m.set_defaults(func=_models)

    a = sub.add_parser("algorithms", help="list the registered algorithms with their settings and defaults",
                       description="Every algorithm run_algorithm knows, its settings and their paper defaults.")
    a.add_argument("--json", action="store_true", help="print JSON instead of text")
    a.set_defaults(func=_algorithms)

    d = sub.add_parser("data", help="verify, download or pack datasets",
                       description="verify: find every file of each dataset and recompute its MD5 (never a "
                                   "remembered one); download: fetch what is missing first (each dataset is "
                                   "reported; the exit status is 2 if any is missing or corrupt). pack: the "
                                   "datasets' files xz-compressed into --to, for a machine without internet; "
                                   "unpack FOLDER: into the data root --to, every MD5 checked.")
    d.add_argument("action", choices=["verify", "download", "pack", "unpack"], help="what to do")
    d.add_argument("names", nargs="+", metavar="NAME", help="dataset names (afl.data.DATASET_NAMES); unpack: the "
                                                            "folder afl data pack wrote")
    d.add_argument("--root", default=None, help="data root to use instead of the search path ($AFL_DATA, data/, "
                                                "~/.cache/afl/data)")
    d.add_argument("--to", default=None, metavar="DIR", help="pack: the folder to write; unpack: the data root to "
                                                             "unpack into (required for both)")
    d.set_defaults(func=_data)

    b = sub.add_parser("bench", help="benchmarks that print measured figures",
                       description="local-sgd: the engine against a per-client loop written the way the papers' "
                                   "codes train (deepcopy + DataLoader + torch.optim.SGD), with the machine's "
                                   "measured fp32 matmul peak. fleet: an experiment's grid of runs one by one "
                                   "and as one fleet, in the same process.")
    b.add_argument("what", choices=["local-sgd", "fleet"], help="what to benchmark")
    b.add_argument("--models", nargs="+", default=["mlp32", "mlp200", "cnn-cifar", "resnet20"],
                   help="models to measure (default: %(default)s)")
    b.add_argument("--clients", nargs="+", type=int, default=[20], help="clients trained at once (default: 20)")
    b.add_argument("--steps", type=int, default=20, help="local steps per client (default: 20)")
    b.add_argument("--device", default="cpu", help="cpu, cuda or cuda:<index> (default: cpu)")
    b.add_argument("--strategy", default="auto", help="engine strategy: auto, vmap, loop, mlp, lstm or lstm-loop "
                                                    "(default: auto)")
    b.add_argument("--precision", default="fp32", help="engine precision: fp32, or bf16 mixed precision (autocast; "
                                                       "parameters and updates in float32); default: fp32")
    b.add_argument("--cuda-graphs", choices=["auto", "on", "off"], default="auto",
                   help="local-sgd on a GPU: replay recorded calls as CUDA graphs (auto: on unless AFL_CUDA_GRAPHS=0)")
    b.add_argument("--root", default=None, help="data root (default: the search path)")
    b.add_argument("--no-reference", action="store_true", help="skip the slow per-client reference loop")
    b.add_argument("--json", action="store_true", help="one JSON object per line")
    b.add_argument("--grid", default="favas-table2", help="fleet: the experiment whose grid is run, a FAVAS, GHBM "
                                                          "(not ghbm-quadratic) or QAFeL one (default: %(default)s)")
    b.add_argument("--paper", action="store_true", help="fleet: the paper setting instead of the quick one")
    b.add_argument("--seeds", type=int, default=None, help="fleet: seeds of the grid (default: the setting's)")
    b.add_argument("--fleet-size", type=int, default=None, help="fleet: runs live at once (default: 64)")
    b.add_argument("--processes", type=int, default=None, metavar="N",
                   help="fleet: also run the grid as N fleets in N processes (afl repro --processes); "
                        "local-sgd (CPU): also time N engines side by side, each a process with 1/N of the threads")
    b.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", dest="overrides",
                   help="fleet: change one field of the grid's setting, as for afl repro (repeatable)")
    b.set_defaults(func=_bench)

    e = sub.add_parser("demo", help="asynchronous MNIST clients: the schedule and the four methods' accuracy",
                       description="Train FedAvg, QuAFL, FedBuff and FAVAS on non-IID MNIST clients with fast "
                                   "and slow clients; print a result table and write pictures.")
    e.add_argument("--out", default="results/demo", help="output folder (default: %(default)s)")
    e.add_argument("--quick", action="store_true", help="a shorter run (about a minute on 2 CPU cores)")
    e.add_argument("--root", default=None, help="data root (default: the search path)")
    e.add_argument("--seed", type=int, default=0, help="seed of partition, speeds, model and schedule")
    e.set_defaults(func=_demo)

    names = ", ".join(EXPERIMENTS)
    r = sub.add_parser("repro", help=f"reproduce a paper's table or figure ({names})",
                       description="Run an experiment's grid of runs and write OUT/<experiment>.json, .md and .png. "
                                   "Every finished run is saved at once in OUT/<experiment>.partial.jsonl; "
                                   "running the same command again resumes from it.")
    r.add_argument("experiment", metavar="EXPERIMENT", help=f"one of: {names}")
    r.add_argument("--quick", action="store_true", help="the quick setting (minutes on 2 CPU cores)")
    r.add_argument("--seeds", type=int, default=None, help="number of seeds (default: the experiment's)")
    r.add_argument("--out", default=None, help="output folder (default: the experiment's own, results/<paper>/"
                                                "<experiment>, e.g. results/favas/table2; GHBM's Table 2 by dataset, "
                                                "e.g. results/ghbm/shakespeare)")
    r.add_argument("--root", default=None, help="data root (default: the search path)")
    r.add_argument("--device", default="cpu", help="cpu, cuda or cuda:<index> (default: cpu)")
    r.add_argument("--fresh", action="store_true", help="discard the saved runs of an interrupted invocation, and "
                                                        "replace a result in OUT that holds runs this one would not")
    r.add_argument("--resume", action="store_true", help="resume from saved runs (the default; kept for scripts)")
    r.add_argument("--reuse", nargs="+", action="extend", default=[], metavar="JSON",
                   help="results of other experiments whose identical runs are taken instead of recomputed")
    r.add_argument("--replot", action="store_true",
                   help="only rewrite the .md and .png from OUT/<experiment>.json (computes nothing)")
    r.add_argument("--fleet-size", type=int, default=None, metavar="N",
                   help="at most N runs live at once in the fleet (bounds memory; default: 64)")
    r.add_argument("--no-fleet", action="store_true", help="run the grid one run after the other (no fleet)")
    r.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                   help="split the grid into fleets run as Ray tasks: on the cluster at ADDRESS, or on "
                        "$AFL_RAY_ADDRESS, or on a local Ray instance (pip install 'afl[ray]')")
    r.add_argument("--processes", type=int, default=None, metavar="N",
                   help="split the grid into N fleets run side by side in N processes of this machine, sharing "
                        "its cores and GPU (where one Python thread, not the device, limits a fleet)")
    r.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", dest="overrides",
                   help="change one field of the experiment's setting, e.g. --set target=0.8 (repeatable; the "
                        "command recorded with the results keeps it). A list is comma-separated (--set "
                        "methods=fedbuff,qafel_c4_s4) or a Python literal, which keeps an item's own commas "
                        "(--set \"tasksets=('mnist,fashion-mnist',)\")")
    r.add_argument("--time-limit", default=None, metavar="DURATION",
                   help="stop cleanly after this long (90s, 9m, 2.5h; a number: minutes), for a job with a time limit "
                        "(Slurm, Colab): finished runs are saved, runs that checkpoint save their state, exit status "
                        "3; "
                        "the same command goes on from them")
    r.add_argument("--allow-large", action="store_true",
                   help="run a setting estimated above afl's limits of work (1e9 client steps, 1e6 evaluations: "
                        "far above every paper setting; afl.budget), which is refused otherwise")
    r.set_defaults(func=_repro)

    v = sub.add_parser("verdicts", help="a class's exercise verdicts (files that $AFL_VERDICTS made), per student",
                       description="Read the JSON lines the exercise checks append where $AFL_VERDICTS points and "
                                   "print one row per student: each exercise's best verdict (correct, wrong, error, "
                                   "not done) and how many checks were run, and the count passed.")
    v.add_argument("files", nargs="+", metavar="FILE", help="verdict files (JSON lines)")
    v.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    v.set_defaults(func=_verdicts)

    s = sub.add_parser("report", help="the scoreboard: every paper claim decided from the committed results",
                       description="Write results/README.md (every cell of the papers' main tables and every "
                                   "ordering their text states: paper, afl, rule, status, scale, device, command) and "
                                   "the summary lines between the markers of README.md, from the committed JSON "
                                   "results alone.")
    s.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale file")
    s.add_argument("--json", action="store_true", help="write nothing; print the board as JSON: per claim its "
                   "paper, id, source, the paper's value, ± and seeds, afl's value, interval and seeds, the rule, "
                   "the status, and the fields in which its result's setting differs from the paper's")
    s.add_argument("--root", default=None, help="the repository (default: the one holding this folder)")
    s.set_defaults(func=_report)

    q = sub.add_parser("plan", help="the paper-scale runs the scoreboard lacks: their cost, and a runner for a job "
                                    "with a time limit",
                       description="list (default): every run that decides a claim the scoreboard shows as not run "
                                   "or at reduced scale, or the probe of one that differs, headline claims first, "
                                   "with its client steps and its minutes on each kind of machine from measured rates "
                                   "(results/measurements/rates.json; each with its source); a job reuses the runs "
                                   "its folder's committed result already holds (--reuse) and counts only the rest. "
                                   "run: run the jobs (or "
                                   "those named) one after the other into --out under --time-limit; the same command "
                                   "goes on from there. "
                                   "archive: pack --out's job folders into --to within the limits given.")
    q.add_argument("action", nargs="?", choices=["list", "run", "archive"], default="list", help="default: list")
    q.add_argument("jobs", nargs="*", metavar="JOB",
                   help="run: these jobs, in this order (default: all, in the plan's order)")
    q.add_argument("--json", action="store_true", help="list: print JSON")
    q.add_argument("--cpu-hours", type=float, default=24.0,
                   help="list: mark the jobs a measured CPU finishes within this many hours (default: 24)")
    q.add_argument("--out", default=None, metavar="DIR", help="run: the folder the jobs write (OUT/<its results "
                                                               "folder>); archive: the folder to pack")
    q.add_argument("--time-limit", default=None, metavar="DURATION",
                   help="run: stop cleanly after this long (90s, 9m, 2.5h), checkpoints saved")
    q.add_argument("--device", default="cpu", help="run: cpu, cuda or cuda:<index> (default: cpu)")
    q.add_argument("--leave-to-cpu", type=float, default=None, metavar="HOURS",
                   help="run: pass over the jobs a measured CPU finishes within HOURS (a GPU's time goes to what a "
                        "CPU cannot do; run those on a CPU meanwhile)")
    q.add_argument("--data-root", default=None, metavar="DIR", help="run: data root (default: the search path)")
    q.add_argument("--processes", type=int, default=None, metavar="N",
                   help="run: each job's runs in N processes (afl repro --processes; the same N in the next job)")
    q.add_argument("--resume-from", default=None, metavar="TAR",
                   help="run: first unpack this archive of afl plan archive into --out")
    q.add_argument("--to", default=None, metavar="DIR", help="archive: where the archives go")
    q.add_argument("--max-file-mb", type=float, default=math.inf, help="archive: no archive larger than this")
    q.add_argument("--max-files", type=int, default=10**6, help="archive: at most this many archives")
    q.add_argument("--max-total-mb", type=float, default=math.inf, help="archive: at most this much together")
    q.add_argument("--root", default=None, help="the repository (default: the one holding this folder)")
    q.set_defaults(func=_plan)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except ValueError as err:          # bad input: say what and why, no traceback
        print(f"afl: error: {err}", file=sys.stderr)
        return 2
    except deadline.Overrun:           # still computing past the limit and its grace: stopped at once
        print("\n" + _interrupted(args, f"a run had not reached its next round or event {deadline.grace_s():g} s past "
                                         "the time limit, so the command stopped at once (each run goes on from its "
                                         "last checkpoint)"), file=sys.stderr)
        return 3
    except TimeLimit:                  # --time-limit (or a first Ctrl-C, SIGTERM): stopped cleanly, to go on later
        signum = deadline.stopped_by()
        if signum is not None:
            name = signal.Signals(signum).name
            print("\n" + _interrupted(args, f"stopped by {name} at every run's next round or event"), file=sys.stderr)
            return 128 + signum
        print("\n" + _interrupted(args, "the time limit is reached"), file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("\n" + _interrupted(args), file=sys.stderr)
        return 130
    except BrokenPipeError:               # the reader went away (afl plan --json | head): nothing left to say
        sys.stdout = open(os.devnull, "w")
        return 0
    except OSError as err:             # a file that cannot be read or written: name it
        where = f"{err.filename}: " if err.filename else ""
        print(f"afl: error: {where}{err.strerror or err}", file=sys.stderr)
        return 2
    except Exception as err:           # anything else unexpected: one line (AFL_TRACEBACK=1 shows where)
        if os.environ.get("AFL_TRACEBACK") == "1":
            raise
        print(f"afl: error: {type(err).__name__}: {err} (AFL_TRACEBACK=1 shows where)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
