"""Page assembly: one HTML file with plotly.js embedded once, readable offline.

Trace strings reach the page only through `html_text` (here) or `plot_text` (in figures). As a
second line of defence the page carries a Content-Security-Policy that allows exactly the
inline scripts written here (by hash) and no network at all, so markup that slipped through
escaping still could not run a script or load anything.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field

import plotly.io as pio  # type: ignore[import-untyped]

from diag.report.escape import html_text
from diag.report.plot import Plot, figure_json

PLOT_CONFIG = {"displaylogo": False, "responsive": True}


@dataclass
class Section:
    """One part of the report: a title, a sentence on how to read it, a figure and/or table."""

    key: str
    title: str
    intro: str  # plain text
    plot: Plot | None = None
    table_html: str = ""  # HTML built by this package, every trace string already escaped
    notes: list[str] = field(default_factory=list)  # plain text, e.g. what was aggregated
    error: str | None = None  # plain text: why this section could not be drawn

    @property
    def plot_id(self) -> str:
        return f"plot-{self.key}"


@dataclass
class Header:
    """What the report is about: plain-text facts shown at the top."""

    title: str
    facts: list[tuple[str, str]]


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 2rem 3rem;
       color: #1d2430; max-width: 1400px; }
h1 { font-size: 1.5rem; margin: 1.2rem 0 .4rem; }
h2 { font-size: 1.2rem; margin-top: 2.2rem; border-bottom: 1px solid #dde; padding-bottom: .2rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0; }
dl.facts dt { color: #667; } dl.facts dd { margin: 0; font-family: ui-monospace, monospace;
       overflow-wrap: anywhere; }
nav ul { display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; list-style: none; padding: 0; }
p.intro { color: #445; max-width: 60rem; }
p.note { color: #7a4b00; background: #fff7e6; padding: .3rem .6rem; border-radius: 4px; }
p.error { color: #8a0010; background: #fdecee; padding: .3rem .6rem; border-radius: 4px; }
table { border-collapse: collapse; width: 100%; font-size: .88rem; margin: .5rem 0; }
th, td { border: 1px solid #dde; padding: .3rem .45rem; vertical-align: top; text-align: left; }
th { background: #f3f5fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.findings ul { margin: 0; padding-left: 1.1rem; }
table.findings .title { font-weight: 600; }
table.findings .where, table.findings .id { color: #667; font-size: .8rem; margin-top: .2rem; }
tr.sev-error td.sev { background: #fbd5d8; font-weight: 600; }
tr.sev-warning td.sev { background: #ffe9bf; }
tr.sev-info td.sev { background: #e3ecfa; }
code, .kernel { font-family: ui-monospace, monospace; font-size: .8rem; overflow-wrap: anywhere; }
.plot { min-height: 300px; }
"""


def render_page(header: Header, sections: list[Section], plotly_js: str) -> str:
    """The whole document. `plotly_js` is plotly.js itself, embedded once in the head."""
    scripts: list[str] = [plotly_js]
    body: list[str] = [f"<h1>{html_text(header.title)}</h1>", _facts(header.facts), _nav(sections)]
    body.extend(_section(section, scripts) for section in sections)
    head_script = f'<script type="text/javascript">{plotly_js}</script>'
    policy = _content_security_policy(scripts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html_text(header.title)}</title>\n<style>{_STYLE}</style>\n"
        f"{head_script}\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"
    )


def _facts(facts: list[tuple[str, str]]) -> str:
    items = "".join(f"<dt>{html_text(k)}</dt><dd>{html_text(v)}</dd>" for k, v in facts)
    return f'<dl class="facts">{items}</dl>'


def _nav(sections: list[Section]) -> str:
    links = "".join(
        f'<li><a href="#{html_text(s.key)}">{html_text(s.title)}</a></li>' for s in sections
    )
    return f"<nav><ul>{links}</ul></nav>"


def _section(section: Section, scripts: list[str]) -> str:
    parts = [
        f'<section id="{html_text(section.key)}">',
        f"<h2>{html_text(section.title)}</h2>",
        f'<p class="intro">{html_text(section.intro)}</p>',
    ]
    if section.error:
        parts.append(f'<p class="error">{html_text(section.error)}</p>')
    notes = list(section.notes)
    if section.plot is not None:
        notes = section.plot.notes + notes
        parts.append(_figure_html(section, scripts))
    parts.extend(f'<p class="note">{html_text(note)}</p>' for note in notes)
    if section.table_html:
        parts.append(section.table_html)
    parts.append("</section>")
    return "\n".join(parts)


def _figure_html(section: Section, scripts: list[str]) -> str:
    """The figure's div and its own inline script (recorded, for the page's hash allowlist)."""
    assert section.plot is not None
    # plotly writes the figure JSON with <, > and / as \\u escapes, so no string in it can end
    # the <script> element. The figure was validated as it was built: written as it is.
    markup: str = pio.to_html(
        figure_json(section.plot.figure),
        validate=False,
        full_html=False,
        include_plotlyjs=False,
        div_id=section.plot_id,
        config=PLOT_CONFIG,
    )
    start = markup.find("<script")
    while start != -1:
        body_start = markup.index(">", start) + 1
        end = markup.index("</script>", body_start)
        scripts.append(markup[body_start:end])
        start = markup.find("<script", end)
    return f'<div class="plot">{markup}</div>'


def _content_security_policy(scripts: list[str]) -> str:
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode("utf-8")).digest()).decode() + "'"
        for s in scripts
    )
    return (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:"
    )
