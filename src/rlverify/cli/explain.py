"""``rlverify explain``: what the policy relies on — safety-relevant features, a decision tree standing in for it
(verified exactly as a policy), and the critical states."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlverify.choices import Optimum
from rlverify.cli.console import console, note, status
from rlverify.cli.options import (
    add_chain_options,
    add_env_kwargs,
    add_outputs,
    add_policy,
    add_property,
    add_target,
    emit,
    names,
    outputs,
    resolve_target,
)
from rlverify.cli.verify import _max_work, shown_policy
from rlverify.errors import OptionError
from rlverify.exact.options import MAX_WORK, ExactOptions
from rlverify.files import check_target, save_figure

PART_NAMES = ("features", "tree", "critical")


def register(sub: Any) -> argparse.ArgumentParser:

    p = sub.add_parser(
        "explain",
        help="what the policy relies on: safety-relevant features, a decision tree verified exactly, critical states",
        description="Safety-relevant features: the exact value when the policy cannot use each feature (fixed to "
        "its initial value, or to each value of its range: --reference range) and under a +-1 perturbation of it "
        "alone. A decision tree fitted to the policy's most likely action, weighted by the chain's exact expected "
        "visits, verified exactly as a policy. Critical states: expected visits x the spread of Q(s,a) over the "
        "offered actions. The tree and the critical states need P [F phi] or P [psi U phi] (step-bounded or not).",
    )
    add_target(p)
    add_env_kwargs(p)
    add_property(p, forms="P=? or P<=b/P>=b with F or U (features: any property verify checks)")
    add_policy(p)
    p.add_argument("--parts", metavar="P1,P2", help=f"parts to compute: {', '.join(PART_NAMES)} (default: all that apply)")
    p.add_argument(
        "--ablate",
        metavar="F1,F2",
        help="features part: the policy features to explain (default: all; --features names a policy file's inputs)",
    )
    p.add_argument(
        "--reference",
        choices=("initial", "range"),
        default="initial",
        help="features part: fix each feature to its initial value (default), or also to every value of its "
        "declared range (the worst is reported)",
    )
    p.add_argument("--no-perturb", action="store_true", help="features part: skip the +-1 perturbation of each feature")
    p.add_argument("--depth", type=int, help="tree part: the tree's depth (default: the smallest reaching --fidelity)")
    p.add_argument(
        "--fidelity",
        type=float,
        default=None,
        help="tree part: the weighted-fidelity target of the depth search (default 0.95)",
    )
    p.add_argument(
        "--save-tree", metavar="FILE.json", help="tree part: write the tree as a policy file (rlverify verify --policy)"
    )
    p.add_argument("--top", type=int, default=10, metavar="K", help="critical part: states to list (default 10)")
    p.add_argument(
        "--worst",
        choices=(Optimum.MAX.value, Optimum.MIN.value),
        help="how to read the property: max = a bad event, min = a goal (default: from P<=b / P>=b or Pmin / Pmax; "
        "P=? is read as a bad event, and the result says so); sets the worst case "
        "over a range and the best action of a critical state",
    )
    add_chain_options(p)
    p.add_argument(
        "--max-work",
        type=float,
        default=MAX_WORK,
        metavar="N",
        help="budget of every step bound's iteration (the tree, critical states, features' checks) in multiply-adds, "
        f"steps x transitions, a step at least 3,000 (default {MAX_WORK:.0e}; it stops early where the values stop changing)",
    )
    add_outputs(p, kinds=".json (the result), .png (the features' bar chart)", seed=False)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from rlverify.exact.explanations import explain_policy  # lazy: stormpy, start-up

    files = outputs(args, (".json", ".png"))
    tree_file = _tree_file(args)
    options = _explain_options(args)
    _check_parts(options.parts or PART_NAMES, ".png" in files, tree_file is not None)
    target = resolve_target(args, "rlverify explain", property=args.property)
    prop, policy = target.property, target.policy
    assert prop is not None and policy is not None
    with status("explaining") as update:
        result = _named(target, explain_policy(target.model, prop, policy, options, progress=update), args.unavailable)
    if tree_file is not None:
        _save_tree(result, tree_file, args.force)
    if ".png" in files and result.features is not None:
        save_figure(result.features.figure(), files[".png"], force=args.force, what="--out", dpi=120)
    if not emit(result, args, files):
        _print_parts(result)
    return 0


def _named(target: Any, result: Any, unavailable: str) -> Any:
    """``result`` and each of its parts stamped with the target, the policy as the user gave it (a shipped one by
    its file name)."""

    def named(part: Any) -> Any:
        return target.stamp(part).with_provenance(policy=shown_policy(part.policy)) if part else None

    result = dataclasses.replace(
        result, features=named(result.features), tree=named(result.tree), critical=named(result.critical)
    )
    return target.stamp(result, unavailable=unavailable).with_provenance(policy=shown_policy(result.policy))


def _print_parts(result: Any) -> None:
    for part in result.parts():
        console.print(str(part).split("\n  warning:")[0])
        console.print("")
    for k, v in result.skipped.items():
        note(f"{k} skipped: {v}")


def _check_parts(wanted: Sequence[str], png: bool, tree: bool) -> None:
    """Refuse a figure of the features, or a tree file, when that part is not computed."""
    if png and "features" not in wanted:
        raise OptionError("--out FILE.png draws the features part: add features to --parts")
    if tree and "tree" not in wanted:
        raise OptionError("--save-tree writes the tree part: add tree to --parts")


def _tree_file(args: argparse.Namespace) -> Path | None:
    """``--save-tree``'s file (None without it), checked before any work."""
    if not args.save_tree:
        return None
    tree_file = Path(args.save_tree)
    if tree_file.suffix.lower() != ".json":
        raise OptionError(f"--save-tree {args.save_tree}: expected a .json file name (a tree policy file)")
    check_target(tree_file, force=args.force, what="--save-tree")
    return tree_file


def _explain_options(args: argparse.Namespace) -> Any:
    """The :class:`~rlverify.exact.explanations.ExplainOptions` of the command line, validated."""
    from rlverify.exact.critical import CriticalOptions  # lazy: stormpy, start-up
    from rlverify.exact.explanations import ExplainOptions  # lazy: the engine, --help start-up
    from rlverify.exact.features import FeatureOptions  # lazy: the engine, --help start-up
    from rlverify.exact.tree import DEFAULT_FIDELITY, TreeOptions  # lazy: the engine, --help start-up

    parts = names(args.parts)
    ablate = names(args.ablate)
    options = ExplainOptions(
        parts=tuple(parts) if parts is not None else (() if args.parts is not None else None),
        exact=ExactOptions(
            mode=args.mode, unavailable=args.unavailable, max_states=args.max_states, max_work=_max_work(args.max_work)
        ),
        features=FeatureOptions(
            features=tuple(ablate) if ablate else None,
            reference=args.reference,
            perturb=not args.no_perturb,
            worst=args.worst,
        ),
        tree=TreeOptions(depth=args.depth, fidelity=DEFAULT_FIDELITY if args.fidelity is None else args.fidelity),
        critical=CriticalOptions(top=args.top, worst=args.worst),
    )
    options.validate()
    options.tree.validate()
    options.critical.validate()
    if args.depth is not None and args.fidelity is not None:
        raise OptionError("--depth and --fidelity: give one (--fidelity chooses the depth)")
    return options


def _save_tree(result: Any, tree_file: Path, force: bool) -> None:
    """The fitted tree as a tree policy file (named after the target)."""
    if result.tree is None:
        raise OptionError(f"--save-tree: no tree was fitted ({result.skipped.get('tree', 'not asked for')})")
    result.tree.tree_policy.metadata["model"] = result.tree.model  # the target's name, not a generated file's
    result.tree.tree_policy.save(tree_file, force=force)
    note(f"wrote the tree policy to {tree_file}")
