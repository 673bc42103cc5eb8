"""Storm's solver settings for each ``--numerics`` choice (the one place that builds an Environment).

* ``sound`` (default): Storm's sound environment (optimistic value iteration, topological):
  the result is within ``precision`` (relative) of the true value.
* ``direct``: Storm's Eigen linear equation solver with its own default method: independent of
  ``precision`` but not exact (measured 1.6e-7 relative error on Freeway); no bounds are reported.
* ``fast``: Storm's plain value iteration with a convergence heuristic; it can stop far from the
  true value on ill-conditioned chains (offered for speed studies only).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from rlverify.choices import Numerics, values
from rlverify.errors import OptionError
from rlverify.imports import after_import

NUMERICS = values(Numerics)

#: a stormpy Environment (stormpy's objects are untyped)
StormEnvironment = Any

_verbose_storm = False  # set by set_storm_logging: -v keeps Storm's own log, also around calls rlverify reports


def storm_log_verbose() -> bool:
    """Whether the CLI asked for Storm's own log (``-v``): :func:`rlverify.models.symbolic.storm_log_off` keeps it."""
    return _verbose_storm


def set_storm_logging(verbose: bool) -> None:
    """Storm logs parse errors to stdout itself; rlverify reports them (with line) as its own errors, so Storm's own
    log is off unless ``verbose`` (then warnings). Set now if stormpy is loaded, else right after it first is: a
    command that never reaches Storm (``rlverify benchmarks list``, a simulation of a continuous system) does not
    load it for this."""
    global _verbose_storm
    _verbose_storm = verbose

    def level(_: ModuleType) -> None:  # after stormpy's __init__, which sets Storm up (its log at WARN)
        import stormpy.developer as dev  # lazy: stormpy, start-up

        dev.set_log_level(dev.LogLevel.WARN if verbose else dev.LogLevel.OFF)

    after_import("stormpy", level)


def environment(numerics: Numerics | str, precision: float) -> StormEnvironment:
    """A stormpy Environment for ``numerics`` with relative ``precision``."""
    import stormpy  # lazy: stormpy, start-up
    from stormpy.environments import EquationSolverType, NativeLinearEquationSolverMethod  # lazy: stormpy, start-up

    if numerics not in NUMERICS:
        raise OptionError(f"--numerics must be one of {', '.join(NUMERICS)}, got '{numerics}'")
    prec = stormpy.Rational(f"{precision:.12g}") if "e" not in f"{precision:.12g}" else _rational(precision)
    if numerics == Numerics.SOUND:
        env = stormpy.environments.sound()
        env.solver().native().precision = prec
        env.solver().min_max().precision = prec
        return env
    env = stormpy.Environment()
    if numerics == Numerics.DIRECT:
        env.solver().set_linear_equation_solver_type(EquationSolverType.EIGEN)  # its default method, not set here
    else:
        env.solver().set_linear_equation_solver_type(EquationSolverType.NATIVE)
        env.solver().native().method = NativeLinearEquationSolverMethod.POWER
    env.solver().native().precision = prec
    env.solver().min_max().precision = prec
    return env


def _rational(x: float) -> Any:
    from fractions import Fraction  # lazy: fractions loads decimal (~1 MB), needed for tiny precisions only

    import stormpy  # lazy: stormpy, start-up

    f = Fraction(x).limit_denominator(10**15)
    return stormpy.Rational(f"{f.numerator}/{f.denominator}")
