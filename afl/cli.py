"""The ``afl`` command line: ``afl models``, ``afl data``, ``afl bench``, ``afl demo``, ``afl repro``."""
from __future__ import annotations

import argparse
import json
import sys


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


def _data(args) -> None:
    from .data import load_dataset
    for name in args.names:
        ds = load_dataset(name, root=args.root, download=args.action == "download")
        print(f"{name}: train {tuple(ds.train_x.shape)}, test {tuple(ds.test_x.shape)}, "
              f"{ds.num_classes} classes, checksums verified")


def _bench(args) -> None:
    from .bench import bench_local_sgd
    rows = []
    for clients in args.clients:
        rows += bench_local_sgd(args.models, clients=clients, steps=args.steps, device=args.device,
                                root=args.root, reference=not args.no_reference, strategy=args.strategy)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    for r in rows:
        ref = f"{r['reference_steps_per_s']:.0f}" if r["reference_steps_per_s"] else "-"
        spd = f"{r['speedup']:.0f}x" if r["speedup"] else "-"
        print(f"{r['model']:<10} {r['device']:<5} {r['strategy']:<5} C={r['clients']:<5} reference {ref:>6} steps/s  "
              f"engine {r['engine_steps_per_s']:>8.0f} steps/s  speedup {spd:>6}  "
              f"{r['engine_gflops']:.1f} GFLOP/s = {100 * r['fraction_of_peak']:.0f}% of "
              f"{r['peak_gflops']:.0f} peak")


def _demo(args) -> None:
    from .demo import run_demo
    paths = run_demo(out=args.out, quick=args.quick, root=args.root, seed=args.seed)
    for p in paths:
        print(p)


def _repro(args) -> None:
    from .repro import run_experiment
    out = run_experiment(args.experiment, quick=args.quick, seeds=args.seeds, out=args.out,
                         root=args.root, device=args.device, resume=args.resume)
    for p in out:
        print(p)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="afl", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("models", help="list the model zoo with parameter counts")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=_models)

    a = sub.add_parser("algorithms", help="list the registered algorithms with their settings and defaults")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=_algorithms)

    d = sub.add_parser("data", help="verify or download datasets")
    d.add_argument("action", choices=["verify", "download"])
    d.add_argument("names", nargs="+")
    d.add_argument("--root", default=None)
    d.set_defaults(func=_data)

    b = sub.add_parser("bench", help="benchmarks that print measured figures")
    b.add_argument("what", choices=["local-sgd"])
    b.add_argument("--models", nargs="+", default=["mlp32", "mlp200", "cnn-cifar", "resnet20"])
    b.add_argument("--strategy", default="auto", help="engine strategy: auto, vmap, loop or mlp")
    b.add_argument("--clients", nargs="+", type=int, default=[20])
    b.add_argument("--steps", type=int, default=20)
    b.add_argument("--device", default="cpu")
    b.add_argument("--root", default=None)
    b.add_argument("--no-reference", action="store_true", help="skip the slow per-client reference loop")
    b.add_argument("--json", action="store_true", help="one JSON object per line")
    b.set_defaults(func=_bench)

    e = sub.add_parser("demo", help="a few asynchronous clients on MNIST: schedule and accuracy pictures")
    e.add_argument("--out", default="results/demo")
    e.add_argument("--quick", action="store_true")
    e.add_argument("--root", default=None)
    e.add_argument("--seed", type=int, default=0)
    e.set_defaults(func=_demo)

    r = sub.add_parser("repro", help="reproduce a paper's table or figure")
    r.add_argument("experiment")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--seeds", type=int, default=None)
    r.add_argument("--out", default="results")
    r.add_argument("--root", default=None)
    r.add_argument("--device", default="cpu")
    r.add_argument("--resume", action="store_true", help="keep the finished runs of an interrupted invocation")
    r.set_defaults(func=_repro)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except ValueError as err:          # bad input: say what and why, no traceback
        print(f"afl: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
