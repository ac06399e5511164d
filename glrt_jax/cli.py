"""Command line interface: ``glrt-jax report``, ``ncx2``, ``calibrate`` and ``reproduce``."""

from __future__ import annotations

import argparse
import sys

# False-positive rates of the attack-risk rows when --fpr is given without values.
DEFAULT_FPR = (1e-3, 1e-2, 1e-1)
_NCX2_FUNCS = ("cdf", "sf", "pdf", "logcdf", "logsf", "logpdf", "ppf", "isf", "logppf", "logisf")


def _setup_cache():
    """Compilation cache of the command line: :func:`glrt_jax.enable_cache`.

    ``$GLRT_JAX_CACHE`` (default ``~/.cache/glrt-jax``; an empty value turns it off): a
    second process loads the compiled programs instead of tracing and compiling them
    again. Commands run inside ``jax.enable_x64(True)`` (thread-local, set by
    :func:`main`), so the process-wide ``jax_enable_x64`` flag is never flipped, not
    even by the CLI.
    """
    from glrt_jax._src.programs import enable_cache

    enable_cache()


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

    acc = accountant.Accountant(
        args.d, threat_model=args.threat_model, neighbouring=args.neighbouring, tol=args.tol
    )
    acc.compose(accountant.Phase(args.noise_multiplier, args.sampling_rate, args.steps))
    rep = acc.delta(args.epsilon) if args.epsilon is not None else acc.epsilon(args.delta)
    print(
        f"Gaussian mechanism: noise_multiplier={args.noise_multiplier:g}, "
        f"sampling_rate={args.sampling_rate:g}, steps={args.steps}, d={args.d}"
        + ("" if rep.mu is None else f"  (mu = {rep.mu:.6g})")
    )
    print(rep.describe() + "\n")
    print(rep.table())
    if args.fpr is not None:
        fpr = args.fpr or list(DEFAULT_FPR)
        print("\nattack risk: true-positive rate at a false-positive rate, and the advantage")
        print(acc.tpr(fpr).table())
        print("\n" + acc.advantage().table())
    if args.plot:
        if rep.mu is None:
            from glrt_jax._src import risk

            risk.roc_figure(acc.roc(), path=args.plot)
        else:
            from glrt_jax import plotting

            plotting.roc_figure(rep.mu, args.d, path=args.plot)
        print(f"\nROC curves written to {args.plot}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="glrt-jax",
        description="Differential-privacy accounting of the Gaussian mechanism (NPO and GLRT).",
        epilog="Compiled programs are cached in $GLRT_JAX_CACHE (default ~/.cache/glrt-jax; "
        "empty: no cache), so later runs skip most of the compilation.",
    )
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
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
        "--fpr",
        type=float,
        nargs="*",
        default=None,
        metavar="FPR",
        help="also report the attack risk: the true-positive rate at these false-positive "
        "rates in (0, 1) (--fpr alone: 1e-3 1e-2 1e-1) and the advantage, NPO and GLRT",
    )
    r.add_argument(
        "--plot",
        metavar="FILE.png",
        help="write the composed ROC curves of NPO and GLRT (shared: also R and R')",
    )
    r.set_defaults(func=_cmd_report)

    from glrt_jax._src import calibrate_cli, reproduce_cli

    calibrate_cli.add_subparser(sub, setup=_setup_cache)
    reproduce_cli.add_subparser(sub, setup=_setup_cache)
    return parser


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _silence_stdout() -> None:
    """Point standard output at the null device (nothing to do without a descriptor)."""
    import contextlib
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    A bad value (``ValueError``), a missing optional dependency (``ImportError``) or a file
    that cannot be written (``OSError``) is printed on one line, ``glrt-jax <command>:
    error: ...``, with exit status 2; anything else as an internal error with status 1.
    ``--debug`` shows the traceback instead. A reader that stops reading early (``| head``)
    ends the command quietly, with status 0.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    import jax

    from glrt_jax._src.programs import quick_compile

    try:
        # The command line computes in float64, and compiles the engine's programs for
        # latency (a process answers a few queries: see glrt_jax._src.programs).
        with jax.enable_x64(True), quick_compile():
            status = args.func(args)
        sys.stdout.flush()  # here, where a closed pipe is handled, not at exit
        return status
    except BrokenPipeError:
        # The reader closed the pipe early (`| head`, `| grep -q`): not an error. Standard
        # output goes to the null device, so the flush at exit does not fail again.
        _silence_stdout()
        return 0
    except (ValueError, ImportError, OSError) as exc:
        if args.debug:
            raise
        print(f"glrt-jax {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        if args.debug:
            raise
        print(
            f"glrt-jax {args.command}: internal error ({type(exc).__name__}): "
            f"{_one_line(exc)} (run again with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
