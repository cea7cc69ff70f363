"""A cold ``python -m explorer params`` loads only the ``params`` subcommand: no pandas, no
plotly, no search, no report (issue 19: the command line starts in under 0.6 s)."""

import subprocess
import sys

import pytest

from explorer import cli

PROBE = """
import sys
from explorer.cli import main
status = main(["params", "--model", "llama-3.1-8b", "--json"])
heavy = ("pandas", "numpy", "plotly", "explorer.search", "explorer.report", "explorer.estimate")
print(status, [name for name in heavy if name in sys.modules])
"""


def test_params_imports_neither_pandas_numpy_nor_the_search_nor_the_report():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "0 []"


def test_a_named_subcommand_builds_its_parser_alone_and_no_name_builds_them_all():
    alone = cli.build_parser("import")  # the one subcommand whose module name differs
    assert alone.parse_args(["import", "--megatron", "run.yaml"]).megatron == "run.yaml"
    with pytest.raises(SystemExit):  # "params" was not loaded: an invalid choice
        alone.parse_args(["params", "--model", "llama-3.1-8b"])
    every = cli.build_parser()
    assert every.parse_args(["params", "--model", "llama-3.1-8b"]).command == "params"
    assert every.parse_args(["import", "--megatron", "run.yaml"]).command == "import"
