"""The ``convkit simulate`` command line: one Local-SGD run on a Gaussian least-squares
problem, its averaged-iterate curve printed as a table."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``convkit simulate``; returns the exit code."""
    import convkit as ck

    p = argparse.ArgumentParser(prog="convkit simulate", description="One Local-SGD run.")
    p.add_argument("--d", type=int, default=20)
    p.add_argument("--spectrum", default="1/i")
    p.add_argument("--noise", type=float, default=1.0)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--comm", default="rounds:10", help="mba, osa, every:H or rounds:N")
    p.add_argument("--C", type=float, default=0.5)
    p.add_argument("--alpha", type=float, default=0.75)
    p.add_argument("--gradients", type=int, default=8 * 2000)
    p.add_argument("--replicates", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--metric", default="hnorm2")
    args = p.parse_args(None if argv is None else list(argv))
    prob = ck.LeastSquares.gaussian(args.d, args.spectrum, args.noise, seed=args.seed)
    algo = ck.LocalSGD(args.workers, ck.PolyDecay(args.C, args.alpha), comm=args.comm)
    res = ck.simulate(
        prob, algo, gradients=args.gradients, replicates=args.replicates, seed=args.seed
    )
    cols = ["step", "gradients", "rounds", "mean", "se", "count"]
    print(res.curve(metric=args.metric, iterate="avg")[cols].to_string(index=False))
    return 0
