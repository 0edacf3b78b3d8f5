"""The 2-bit client's rows near QAFeL's 91 % target, run by run and CPU kind by CPU kind (issue 52 §3: 2/2).

At the paper's load the rows' accuracies flatten near 88-90 % long before the 91 % target, so "uploads to the target"
measures when a slowly rising, noisy curve first crosses it. This reads committed results of ``afl repro
qafel-table1`` (or of ``tools/qafel_server_channel.py``) and writes, per run of the rows asked: the mean accuracy in
windows of ``--window`` uploads, the uploads to the target where it was reached, and the loss of its first evaluation.
That evaluation tests the seeded initial model, the same for every row of a seed, so it names the kind of CPU that
evaluated it: runs of one kind give it to the last digit, another kind's part in the seventh (the same seed rounds
otherwise on another kind of CPU, and older results did not record which); beside each loss, the CPU kinds recorded
by the results that give it (``afl.runtime.cpu_kind`` in their machine). Writes ``OUT/late-race.json`` and ``.md``.

    python tools/qafel_late_race.py --out results/qafel/late-race results/qafel/table1/paper-load/qafel-table1.json \
        results/qafel/table1/paper-load-2-4-on-avx2/qafel-table1.json results/qafel/server-channel/server-channel.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import qafel_probe  # noqa: E402
from afl.repro import qafel as qr  # noqa: E402
from afl.repro.runner import afl_commit, machine_cpu_kind, write_probe  # noqa: E402

ROWS = qafel_probe.TWO_BIT_CLIENT


def runs_of(path: Path, methods: tuple) -> list[dict]:
    """The runs of ``methods`` (no concurrency sweep) in one committed result, each with its result's folder and the
    machine that computed it (its ``--reuse`` source's where it has one)."""
    result = json.loads(path.read_text())
    out = []
    for run in result.get("runs", result.get("rows", [])):
        if run["method"] in methods and run.get("concurrency") is None:
            machine = run.get("source", {}).get("machine", result["machine"])
            out.append({"result": str(path.relative_to(ROOT)), "method": run["method"], "seed": run["seed"],
                        "machine": machine, "curve": run["curve"], "reached_at_uploads": run.get("uploads_to_target")})
    return out


def fingerprints(runs: list[dict]) -> list[dict]:
    """Per seed and first-evaluation loss: how many runs give it and the CPU kinds recorded by those that record
    one (one seed's losses tell two kinds apart only where the kinds evaluate its initial model differently)."""
    seen: dict = {}
    for run in runs:
        entry = seen.setdefault((run["seed"], run["curve"]["loss"][0]), {"runs": 0, "kinds": set()})
        entry["runs"] += 1
        kind = machine_cpu_kind(run["machine"])
        if kind:
            entry["kinds"].add(kind)
    return [{"seed": seed, "first_loss": loss, "runs": e["runs"], "recorded_kinds": sorted(e["kinds"])}
            for (seed, loss), e in sorted(seen.items())]


def summary(runs: list[dict], start: int, stop: int, width: int) -> list[dict]:
    """Per run: its source, the CPU kind it records (None where its result predates that), its first loss, its
    window means and its uploads to the target."""
    rows = [{k: run[k] for k in ("result", "method", "seed", "reached_at_uploads")}
            | {"cpu": machine_cpu_kind(run["machine"]), "first_loss": run["curve"]["loss"][0],
               "windows": qr.window_means(run["curve"], start, stop, width)} for run in runs]
    return sorted(rows, key=lambda r: (ROWS.index(r["method"]) if r["method"] in ROWS else len(ROWS), r["seed"],
                                       r["result"]))


def markdown(result: dict) -> str:
    start, stop, width = result["windows"]
    heads = [f"{a // 1000}–{(a + width) // 1000} k" for a in range(start, stop, width)]
    lines = ["# QAFeL's 2-bit client rows near the target, by CPU kind", "", f"Command: `{result['command']}`", "",
             "Per run: the CPU kind its result records (– where it predates that), the loss of its first evaluation "
             "(the seed's initial model, the same for every row), the uploads to the target where reached, and the "
             "mean accuracy (%) of its evaluations in each window of uploads (– where the run had stopped).", "",
             "| row | seed | result | CPU kind recorded | first loss | uploads to target | " + " | ".join(heads) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(heads)]
    for r in result["rows"]:
        reached = "–" if r["reached_at_uploads"] is None else f"{r['reached_at_uploads']:,}"
        cells = ["–" if w is None else f"{100 * w:.2f}" for w in r["windows"]]
        lines.append(f"| {qr.label(r['method'])} | {r['seed']} | `{r['result']}` | {r['cpu'] or '–'} | "
                     f"{r['first_loss']!r} | {reached} | " + " | ".join(cells) + " |")
    lines += ["", "Each seed's first losses: the runs that give each, and the CPU kinds recorded among them:", "",
              "| seed | first loss | runs | CPU kinds recorded |", "|---|---|---|---|"]
    lines += [f"| {f['seed']} | {f['first_loss']!r} | {f['runs']} | {', '.join(f['recorded_kinds']) or '–'} |"
              for f in result["fingerprints"]]
    return "\n".join(lines) + "\n"


def arguments():
    """The tool's command line (:func:`qafel_probe.parser` and its own options)."""
    p = qafel_probe.parser(__doc__, window=5000, methods=ROWS,
                           results="committed qafel-table1 (or server-channel) JSON results")
    p.add_argument("--start", type=int, default=20000, help="the first window's start, in uploads")
    p.add_argument("--stop", type=int, default=40000, help="the last window's end, in uploads")
    return p


def main() -> int:
    p = arguments()
    args = p.parse_args()
    runs = [run for path in args.results for run in runs_of((ROOT / path).resolve(), args.methods)]
    result = {"command": qafel_probe.command("qafel_late_race.py", p, args), "afl_commit": afl_commit(),
              "windows": [args.start, args.stop, args.window],
              "rows": summary(runs, args.start, args.stop, args.window), "fingerprints": fingerprints(runs)}
    write_probe(result, args.out, "late-race", markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
