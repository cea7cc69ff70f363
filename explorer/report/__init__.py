"""The downloadable layout report: one pure builder, four renderers, and loading JSON back.

``build_report(scenario)`` gives a frozen ``Report`` (sections of sentences, pandas tables and
launch settings; results as JSON-ready data; what the figures are drawn from). Renderers:
``report_markdown``, ``report_html`` (figures passed in as HTML fragments), ``report_pdf``
(figures passed in as PNG bytes; needs WeasyPrint) and ``report_json``, which
``load_report_json`` reads back into the Scenario. Plotly never enters here:
``explorer.charts.report`` draws the figures for the callers.
"""

from explorer.report.content import FIGURES, FigureData, Report, build_report
from explorer.report.html import report_html
from explorer.report.json_io import FORMAT, VERSION, load_report_json, report_json
from explorer.report.markdown import report_markdown
from explorer.report.pdf import ReportFormatUnavailable, pdf_available, report_pdf
from explorer.report.ranking import RankedLayout, Ranking
from explorer.report.tables import CodeBlock, Section, Table

__all__ = [
    "FIGURES",
    "FORMAT",
    "VERSION",
    "CodeBlock",
    "FigureData",
    "RankedLayout",
    "Ranking",
    "Report",
    "ReportFormatUnavailable",
    "Section",
    "Table",
    "build_report",
    "load_report_json",
    "pdf_available",
    "report_html",
    "report_json",
    "report_markdown",
    "report_pdf",
]
