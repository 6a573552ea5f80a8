"""Cells of the CSV exports that open safely in a spreadsheet.

A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a
formula by Excel, LibreOffice Calc and Google Sheets ("CSV injection", OWASP). Node descriptions,
port names and alarm messages come from the fabric (NodeDescription is set by each host), so an
export must not hand them to a spreadsheet as formulas: such a cell gets a leading apostrophe, as
OWASP's "CSV Injection" page advises. Numbers are written as numbers (a negative value stays one).
"""

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """``text`` unchanged, or with a leading ``'`` when a spreadsheet would read it as a formula."""
    if text.startswith(_FORMULA_STARTS):
        return "'" + text
    return text
