"""Command line interface: ``glrt-jax report``, ``ncx2``, ``calibrate`` and ``reproduce``."""

from __future__ import annotations

import argparse
import sys

_NCX2_FUNCS = ("cdf", "sf", "pdf", "logcdf", "logsf", "logpdf", "ppf", "isf", "logppf", "logisf")


def _setup_cache():
    """Compilation cache of the command line (float64 comes from :func:`main`'s context).

    Commands run inside ``jax.enable_x64(True)`` (thread-local, set by :func:`main`), so
    the process-wide ``jax_enable_x64`` flag is never flipped, not even by the CLI.
    """
    import os

    import jax

    cache = os.environ.get(
        "GLRT_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "glrt-jax")
    )
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def _cmd_ncx2(args) -> int:
    _setup_cache()
    import numpy as np

    from glrt_jax import ncx2

    fn = getattr(ncx2, args.function)
    values = np.asarray(args.values, dtype=np.float64)
    out = np.asarray(fn(values, args.df, args.nc))
    for v, o in zip(values, out, strict=True):
        print(f"{args.function}({float(v)!r}; df={args.df!r}, nc={args.nc!r}) = {float(o)!r}")
    return 0


def _cmd_report(args) -> int:
    _setup_cache()
    from glrt_jax import accountant

    try:
        kw = dict(
            d=args.d, threat_model=args.threat_model, neighbouring=args.neighbouring, tol=args.tol
        )
        phase = (args.noise_multiplier, args.sampling_rate, args.steps)
        if args.epsilon is not None:
            rep = accountant.delta(args.epsilon, *phase, **kw)
        else:
            rep = accountant.epsilon(args.delta, *phase, **kw)
    except ValueError as exc:
        print(f"glrt-jax report: {exc}", file=sys.stderr)
        return 2
    print(
        f"Gaussian mechanism: noise_multiplier={args.noise_multiplier:g}, "
        f"sampling_rate={args.sampling_rate:g}, steps={args.steps}, d={args.d}"
        + ("" if rep.mu is None else f"  (mu = {rep.mu:.6g})")
    )
    print(rep.describe() + "\n")
    print(rep.table())
    if args.plot:
        if rep.mu is None:
            print(
                "\n--plot draws the closed-form curves of --threat-model shared; ignored here",
                file=sys.stderr,
            )
        else:
            try:
                from glrt_jax import plotting
            except ImportError as exc:
                print(f"glrt-jax report: {exc}", file=sys.stderr)
                return 2
            plotting.roc_figure(rep.mu, args.d, path=args.plot)
            print(f"\nROC curves written to {args.plot}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="glrt-jax",
        description="Differential-privacy accounting of the Gaussian mechanism (NPO and GLRT).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("ncx2", help="non-central chi-squared functions, full precision")
    p.add_argument("function", choices=_NCX2_FUNCS)
    p.add_argument("--df", type=float, required=True, help="degrees of freedom (> 0)")
    p.add_argument("--nc", type=float, required=True, help="non-centrality (>= 0)")
    p.add_argument(
        "values",
        nargs="+",
        type=float,
        help="x (distribution functions), p (ppf/isf) or log p (logppf/logisf)",
    )
    p.set_defaults(func=_cmd_ncx2)

    r = sub.add_parser("report", help="epsilon (or delta) for NPO and GLRT side by side")
    r.add_argument(
        "--noise-multiplier",
        type=float,
        required=True,
        help="noise standard deviation over the l2 sensitivity (sigma/Delta) > 0",
    )
    r.add_argument(
        "--sampling-rate", type=float, default=1.0, help="Poisson sampling rate q in (0, 1]"
    )
    r.add_argument("--steps", type=int, default=1, help="number of releases N (default 1)")
    r.add_argument("--d", type=int, default=1, help="query dimension d (GLRT; default 1)")
    g = r.add_mutually_exclusive_group(required=True)
    g.add_argument("--delta", type=float, help="report epsilon at this delta")
    g.add_argument("--epsilon", type=float, help="report delta at this epsilon")
    r.add_argument(
        "--threat-model",
        choices=("per_round", "shared"),
        default="per_round",
        help="per_round: independent rounds, numeric composition (DP-SGD; default); "
        "shared: one shared direction (Theorem 2, closed form, no subsampling)",
    )
    r.add_argument(
        "--neighbouring",
        choices=("add_remove", "replace_one"),
        default="add_remove",
        help="neighbouring relation (default add_remove)",
    )
    r.add_argument(
        "--tol",
        type=float,
        default=1e-3,
        help="relative accuracy of the certified bounds (per_round; default 1e-3)",
    )
    r.add_argument(
        "--plot", metavar="FILE.png", help="write the ROC curves (NPO, R, R', R_s); shared only"
    )
    r.set_defaults(func=_cmd_report)

    from glrt_jax._src import calibrate_cli, reproduce_cli

    calibrate_cli.add_subparser(sub, setup=_setup_cache)
    reproduce_cli.add_subparser(sub, setup=_setup_cache)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    import jax

    with jax.enable_x64(True):  # the command line computes in float64
        return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
