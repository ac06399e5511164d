"""Accounting for phases of the Gaussian mechanism: NPO and GLRT side by side.

:class:`Accountant` composes :class:`Phase` objects (σ/Δ, sampling rate, steps) under one
of two threat models (``threat_model="per_round"``: independent, possibly subsampled
rounds, numeric composition with certified bounds; ``"shared"``: Theorem 2's shared
direction, closed form) and answers with a :class:`PrivacyReport` for both adversaries.
:func:`epsilon`, :func:`delta`, :func:`tpr` and :func:`advantage` are one-call shortcuts
(the last two: what an attacker can do, true-positive rate at a false-positive rate and
maximal advantage, for the composed mechanism); :func:`schedule_epsilon` and
:func:`schedule_delta` are the jittable, differentiable per-round engine for one
adversary, taking arrays of phases.
"""

from glrt_jax._src.accountant import (
    NEIGHBOURINGS,
    THREAT_MODELS,
    Accountant,
    Phase,
    PrivacyReport,
    advantage,
    delta,
    epsilon,
    mu,
    schedule_delta,
    schedule_epsilon,
    tpr,
)
from glrt_jax._src.composition import JIT_SIZES, NODES, POINTS, Bounds

__all__ = [
    "JIT_SIZES",
    "NEIGHBOURINGS",
    "NODES",
    "POINTS",
    "THREAT_MODELS",
    "Accountant",
    "Bounds",
    "Phase",
    "PrivacyReport",
    "advantage",
    "delta",
    "epsilon",
    "mu",
    "schedule_delta",
    "schedule_epsilon",
    "tpr",
]
