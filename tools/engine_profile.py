"""Where the engine's time goes in one call: ``torch.profiler`` over local SGD of C clients x J steps in the setting
of ``afl bench local-sgd`` (its model, dataset and batch), the operators by self CPU time.

    python tools/engine_profile.py [--model mlp32] [--clients 20] [--steps 20] [--rows 12]

The profile covers four engine calls (one warm-up and the three the rate is the best of); profiling slows them.
"""
import argparse

from torch.profiler import ProfilerActivity, profile

from afl.bench import SETTINGS, engine_steps_per_s, local_sgd_case

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--model", default="mlp32", choices=sorted(SETTINGS))
parser.add_argument("--clients", type=int, default=20)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--rows", type=int, default=12)
args = parser.parse_args()
module, dataset, parts, batch = local_sgd_case(args.model, args.clients, "cpu")
with profile(activities=[ProfilerActivity.CPU]) as prof:
    rate, _ = engine_steps_per_s(module, dataset, parts, args.steps, batch, lr=0.05)
print(f"{args.model}, {args.clients} clients x {args.steps} steps of batch {batch}: {rate:.0f} client-steps/s "
      "under the profiler")
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
