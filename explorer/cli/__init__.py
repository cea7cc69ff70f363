"""``python -m explorer``: the command-line face of the core (docs/ARCHITECTURE.md).

Each subcommand lives in its own module of this package and exposes ``NAME``, ``HELP``,
``add_arguments(parser)``, ``run(args) -> dict`` (the JSON object) and ``render(result) -> str``
(the human-readable text). Every failure prints one sentence on stderr and exits with status 2
(``main`` is the one place that catches them); Ctrl-C prints "interrupted." and exits with 130.
JSON output holds only finite numbers (a non-finite one is written as null).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

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
    "import_",
    "flexsp",
    "helix",
)
"""Subcommand modules of this package, in the order ``--help`` lists them."""


class UserError(Exception):
    """A problem with what the user asked for; its message is one sentence."""


class _Parser(argparse.ArgumentParser):
    """argparse without abbreviated long options: ``estimate --gpus 16`` would otherwise be
    read, silently, as ``--gpus-per-node 16`` (one 16-GPU node), where ``search --gpus`` means
    16 GPUs in all. A mistyped or foreign option is one sentence, exit 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        _fail(f"{self.prog}: {message}")


MAX_MESSAGE_CHARS = 400
"""A failure's sentence is cut to this length (a hostile value can be megabytes long)."""


def _fail(message: str) -> NoReturn:
    sentence = " ".join(str(message).split())
    if len(sentence) > MAX_MESSAGE_CHARS:
        sentence = sentence[: MAX_MESSAGE_CHARS - 3] + "..."
    sys.stderr.write(sentence.rstrip(".") + ".\n")
    raise SystemExit(2)


INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT, as shells report it)."""


def _describe(error: BaseException) -> str:
    """One sentence for any failure (the message of a user error; the kind for the others)."""
    if isinstance(error, pydantic.ValidationError):
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    if isinstance(error, MemoryError):
        return "out of memory: the request is too large for this machine; ask for less"
    if isinstance(error, RecursionError):
        return "the input is nested too deeply to process"
    if isinstance(error, ArithmeticError):  # ZeroDivisionError, OverflowError
        return f"cannot compute this input ({type(error).__name__}: {error}); check for zeros"
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])  # str() of a KeyError adds quotes
    if isinstance(error, UserError | ValueError | OSError):
        return str(error) or type(error).__name__
    return f"internal error ({type(error).__name__}: {error}); please report it with the command"


def _module_name(command: str) -> str:
    """The module of a subcommand's name (``import`` is a keyword, so its module is ``import_``)."""
    return "import_" if command == "import" else command


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or of ``command`` alone when it names one (so that
    ``params`` does not import pandas and the search; see docs/ARCHITECTURE.md, cold start)."""
    parser = _Parser(prog="python -m explorer", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    names = COMMANDS
    if command is not None and _module_name(command) in COMMANDS:
        names = (_module_name(command),)
    for name in names:
        module = importlib.import_module(f"explorer.cli.{name}")
        child = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        child.add_argument("--json", action="store_true", help="print one JSON object")
        module.add_arguments(child)
        child.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; 0 on success, 2 (one sentence on stderr) on any failure, 130 on
    Ctrl-C."""
    try:
        arguments = sys.argv[1:] if argv is None else list(argv)
        first = arguments[0] if arguments and not arguments[0].startswith("-") else None
        args = build_parser(first).parse_args(arguments)
        result = args._module.run(args)
        text = finite_json(result) if args.json else args._module.render(result)
        sys.stdout.write(text + "\n")
    except KeyboardInterrupt:
        sys.stderr.write("interrupted.\n")
        return INTERRUPTED
    except Exception as error:  # the one place every failure becomes a sentence
        _fail(_describe(error))
    return 0


def finite_json(value: object) -> str:
    """``value`` as strict JSON: numpy values as Python ones, non-finite floats as null."""
    return json.dumps(_finite(value), allow_nan=False)


def _finite(value: object) -> object:
    if hasattr(value, "tolist"):
        value = value.tolist()  # numpy scalars and arrays
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
