"""``convtune tune-model module:callable --input-shape N,C,H,W``: tune every convolution of a PyTorch model.

Registered by :func:`convtune.cli.build_parser`; the work is :func:`convtune.ops.torch.tune`. ``module:callable``
names a function (or class) that returns the ``nn.Module`` — e.g. ``torchvision.models:resnet50``; the model is
moved to ``--device`` in eval mode and run once on a random input of ``--input-shape``. Input errors (the
callable, the shape, a missing torch) print one line naming the option and exit with status 2. torch is imported
inside the command only.
"""

from __future__ import annotations

import argparse
import importlib
import json
from typing import Any

from convtune.errors import InvalidInput
from convtune.machine import preset_help
from convtune.vocabulary import BACKENDS as BACKENDS


def add_model_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tune-model", help="tune every distinct convolution of a PyTorch model (locally or on a service)",
        description="Run the model once with hooks on every nn.Conv2d, tune each distinct convolution the kernels "
                    "run (dense groups=1, depthwise groups=C; float32) and print a per-layer table: shape, family, "
                    "tuned ms, floor ms, efficiency, share of the model's convolution time. Afterwards "
                    "convtune.ops.torch's ops in any process reading the same database run the tuned configurations.",
        epilog="example: convtune tune-model torchvision.models:resnet50 --input-shape 32,3,224,224 --budget-s 600")
    p.add_argument("model", metavar="MODULE:CALLABLE", help="a callable returning the nn.Module")
    p.add_argument("--input-shape", required=True, metavar="N,C,H,W", help="shape of the example input")
    p.add_argument("--device", default="cuda", help="device of the model and the input (default cuda)")
    p.add_argument("--budget-s", type=float, default=600.0, help="tuning time for the whole model (default 600)")
    p.add_argument("--budget-trials", type=int, default=200, help="trials per distinct convolution (default 200)")
    p.add_argument("--patience", type=int, default=60, help="stop a convolution after this many trials without "
                                                            "improvement")
    p.add_argument("--backend", choices=BACKENDS, default="gpu",
                   help="local tuning's benchmarker: gpu (default), model (predictions: a demo without a GPU, "
                        "never served to the ops) or replay (--replay FILE)")
    p.add_argument("--replay", metavar="FILE", help="timing table for --backend replay")
    p.add_argument("--machine", default="h200",
                   help=f"machine preset for --backend model ({preset_help()}; default h200)")
    p.add_argument("--url", default=None, help="queue the convolutions on a running convtune service instead")
    p.add_argument("--api-key", default=None, help="the service's API key (default $CONVTUNE_API_KEY)")
    p.add_argument("--db", metavar="URL", default=None,
                   help="database URL for local tuning (default: $CONVTUNE_DATABASE_URL, else a per-user SQLite file)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the per-layer rows as JSON instead of the table")
    p.set_defaults(func=cmd_tune_model)


def _load(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidInput("MODULE:CALLABLE", f"{spec!r}: expected module:callable, e.g. torchvision.models:resnet50")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise InvalidInput("MODULE:CALLABLE", f"{spec!r}: {exc}") from None
    if not callable(target):
        raise InvalidInput("MODULE:CALLABLE", f"{spec!r} is not callable")
    return target


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise InvalidInput("--input-shape", f"{text!r}: comma-separated positive integers, e.g. 32,3,224,224") from None
    if not shape or min(shape) < 1:
        raise InvalidInput("--input-shape", f"{text!r}: comma-separated positive integers, e.g. 32,3,224,224")
    return shape


def _benchmarker(args: argparse.Namespace) -> Any:
    if args.backend == "model":
        from convtune.machine import MachineModel
        from convtune.tuner.benchmark import ModelBenchmarker

        return ModelBenchmarker(MachineModel.preset(args.machine))
    if args.backend == "replay":
        from convtune.tuner.benchmark import ReplayBenchmarker, ReplayTable

        return ReplayBenchmarker(ReplayTable.for_option(args.replay))
    return None  # the GPU benchmarker in a subprocess (convtune.ops.torch.tune's default)


def cmd_tune_model(args: argparse.Namespace) -> int:
    factory = _load(args.model)
    shape = _shape(args.input_shape)
    if args.budget_trials < 1:
        raise InvalidInput("--budget-trials", f"{args.budget_trials} must be >= 1")
    try:
        import torch

        import convtune.ops.torch as ct
    except ImportError as exc:
        raise InvalidInput("torch", f"PyTorch is needed: pip install 'convtune[torch]' ({exc})") from None
    try:
        device = torch.device(args.device)
    except (RuntimeError, ValueError) as exc:
        raise InvalidInput("--device", str(exc)) from None
    model = factory()
    if not isinstance(model, torch.nn.Module):
        raise InvalidInput("MODULE:CALLABLE", f"{args.model} returned {type(model).__name__}, not an nn.Module")
    model = model.to(device).eval()
    example = torch.randn(*shape, device=device)
    try:
        with torch.no_grad():
            model(example)
    except RuntimeError as exc:  # a shape the model does not take: the user's input, one line
        raise InvalidInput("--input-shape", f"the model's forward failed on a {shape} input: {exc}") from None
    result = ct.tune(model, example, budget_s=args.budget_s, url=args.url, budget_trials=args.budget_trials,
                     patience=args.patience, db=args.db, api_key=args.api_key, benchmarker=_benchmarker(args),
                     progress=not args.no_progress, show=not args.json)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    return 0
