"""Command line interface: ``glrt-jax ncx2 ...`` (and ``report``, see below)."""

from __future__ import annotations

import argparse
import sys

_NCX2_FUNCS = ("cdf", "sf", "pdf", "logcdf", "logsf", "logpdf", "ppf", "isf", "logppf", "logisf")


def _enable_x64():
    import jax

    jax.config.update("jax_enable_x64", True)


def _cmd_ncx2(args) -> int:
    _enable_x64()
    import numpy as np

    from glrt_jax import ncx2

    fn = getattr(ncx2, args.function)
    values = np.asarray(args.values, dtype=np.float64)
    out = np.asarray(fn(values, args.df, args.nc))
    for v, o in zip(values, out, strict=True):
        print(f"{args.function}({float(v)!r}; df={args.df!r}, nc={args.nc!r}) = {float(o)!r}")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
