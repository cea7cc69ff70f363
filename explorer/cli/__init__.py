"""``python -m explorer``: the command-line face of the core (contract in DESIGN.md).

Each subcommand lives in its own module of this package and exposes ``NAME``, ``HELP``,
``add_arguments(parser)``, ``run(args) -> dict`` (the JSON object) and ``render(result) -> str``
(the human-readable text). Bad input prints one sentence on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import NoReturn

import pydantic

COMMANDS: tuple[str, ...] = (
    "params",
    "estimate",
    "search",
    "schedule",
    "serve",
    "report",
    "scaling",
    "probe",
)
"""Subcommand modules of this package, in the order ``--help`` lists them."""


class UserError(Exception):
    """A problem with what the user asked for; its message is one sentence."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        _fail(f"{self.prog}: {message}")


def _fail(message: str) -> NoReturn:
    sentence = " ".join(str(message).split())
    sys.stderr.write(sentence.rstrip(".") + ".\n")
    raise SystemExit(2)


def _describe(error: Exception) -> str:
    if isinstance(error, pydantic.ValidationError):
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(error)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m explorer", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"explorer.cli.{name}")
        child = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        child.add_argument("--json", action="store_true", help="print one JSON object")
        module.add_arguments(child)
        child.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module = args._module
    try:
        result = module.run(args)
    except (UserError, ValueError, KeyError, OSError, pydantic.ValidationError) as error:
        _fail(_describe(error))
    if args.json:
        sys.stdout.write(json.dumps(result, default=_jsonable) + "\n")
    else:
        sys.stdout.write(module.render(result) + "\n")
    return 0


def _jsonable(value: object) -> object:
    if hasattr(value, "tolist"):
        return value.tolist()  # numpy scalars and arrays
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
