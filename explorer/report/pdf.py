"""The report as PDF: the HTML page with PNG charts, laid out by WeasyPrint (no JavaScript).

WeasyPrint is optional at run time (the ``report`` extra, and its system libraries Pango and
HarfBuzz); without it ``report_pdf`` raises ``ReportFormatUnavailable`` with a sentence the app
or the CLI shows. Charts come from the caller as PNG bytes by figure name; without them the PDF
is made all the same and says that charts were left out.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from html import escape
from types import ModuleType

from explorer.report.content import Report
from explorer.report.html import report_html
from explorer.report.markdown import FIGURE_TITLES

NO_CHARTS = (
    "Charts were left out of this PDF because no chart images could be made here (Kaleido "
    "with Chromium is needed); the HTML report draws them."
)
"""Why figures are missing when no PNGs were given."""


class ReportFormatUnavailable(RuntimeError):
    """A report format needs a library that is not installed here; the message says which."""


def weasyprint_module() -> ModuleType:
    """The ``weasyprint`` module; ReportFormatUnavailable when it or its libraries are missing."""
    try:
        import weasyprint
    except (ImportError, OSError) as error:
        raise ReportFormatUnavailable(
            "PDF reports need WeasyPrint and its system libraries (pip install weasyprint; "
            f"apt-get install libpango-1.0-0 libpangoft2-1.0-0), which are missing here: {error}"
        ) from None
    return weasyprint


def pdf_available() -> bool:
    """Whether ``report_pdf`` can run here."""
    try:
        weasyprint_module()
    except ReportFormatUnavailable:
        return False
    return True


def png_fragments(report: Report, pngs: Mapping[str, bytes]) -> dict[str, str]:
    """``<img>`` tags with the PNGs inlined as data URLs, by figure name."""
    return {
        name: (
            f'<img alt="{escape(FIGURE_TITLES.get(name, name))}" '
            f'src="data:image/png;base64,{base64.b64encode(pngs[name]).decode("ascii")}">'
        )
        for name in report.figure_names
        if name in pngs
    }


def report_pdf(report: Report, pngs: Mapping[str, bytes] | None = None) -> bytes:
    """The report as PDF bytes, charts from ``pngs`` (figure name -> PNG bytes).

    Raises ReportFormatUnavailable when WeasyPrint cannot run here.
    """
    weasyprint = weasyprint_module()
    images = png_fragments(report, pngs or {})
    missing = NO_CHARTS if len(images) < len(report.figure_names) else ""
    page = report_html(report, images, missing_note=missing)
    data: bytes = weasyprint.HTML(string=page).write_pdf()
    return data
