"""The report as a result and as a page: its sections and checks, the JSON, and one self-contained HTML document."""

from __future__ import annotations

import base64
import builtins
import html
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlverify.files import write_text
from rlverify.results import Result, Summary


@dataclass
class Section:
    """One engine's part of a report: key/value rows, tables ``(caption, header, rows)`` and PNG images."""

    title: str
    rows: list[tuple[str, str]] = field(default_factory=list)
    tables: list[tuple[str, list[str], list[list[str]]]] = field(default_factory=list)
    images: list[tuple[str, bytes]] = field(default_factory=list)
    note: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Check:
    """A cross-method consistency check: its name, whether it holds, and both numbers in words."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Report(Result):
    """What every applicable engine said about one target, and whether they agree.

    Attributes:
        kind: the target's kind (model, property, policy: the provenance's, as resolved).
        headline: the verdict in a few rows (the policy's value, the best and worst possible, the estimate),
            shown first on the page.
        sections: one per engine run (or skipped, with the reason).
        checks: the cross-method consistency checks.
        provenance: settings (runs, seed, delta, epsilon, ...); timings (seconds per section); versions.
    """

    kind: str
    sections: list[Section]
    checks: list[Check]
    headline: list[tuple[str, str]] = field(default_factory=list)

    @builtins.property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(c.ok for c in self.checks)

    def disagreements(self) -> list[str]:
        """One line per failed check, with both numbers."""
        return [f"{self.model}: {c.name}: {c.detail}" for c in self.checks if not c.ok]

    def _summary(self) -> Summary:
        """The verdict, each consistency check and each section's headline rows (:meth:`to_html` is the full page)."""
        rows = [(c.name, ("holds: " if c.ok else "FAILS: ") + c.detail) for c in self.checks]
        rows += [(s.title, "; ".join(f"{k} {v}" for k, v in s.rows[:3]) or s.note) for s in self.sections]
        return Summary(
            f"report: every applicable engine on one {self.kind} target (to_html() for the page)",
            "all engines agree" if self.ok else "ENGINES DISAGREE",
            "each section states its own guarantee (exact, sound bound or statistical interval)",
            tuple(rows),
        )

    def _json(self, own: dict[str, Any]) -> dict[str, Any]:
        """``ok``, the checks, and each section's rows, note and data."""
        return {
            "kind": self.kind,
            "ok": self.ok,
            "headline": dict(self.headline),
            "checks": [vars(c) for c in self.checks],
            "sections": [{"title": s.title, "rows": dict(s.rows), "note": s.note, **s.data} for s in self.sections],
        }

    def to_html(self) -> str:
        """The page: one self-contained HTML document (inline CSS, images as data URIs)."""
        e = html.escape
        parts = [
            f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>rlverify report — {e(self.model)}"
            f"</title><style>{_CSS}</style></head><body>",
            f"<h1>rlverify report</h1><p class='sub'>{e(self.model)} · {e(self.property)} · policy "
            f"{e(self.policy or '—')}</p>",
        ]
        verdict = "all engines agree" if self.ok else "ENGINES DISAGREE"
        if self.headline:
            parts.append(self._verdict_html(verdict))
        parts.append(
            f"<h2 id='checks'>Consistency <span class='{'ok' if self.ok else 'bad'}'>{verdict}</span></h2>"
            "<table><tr><th>check</th><th>holds</th><th>numbers</th></tr>"
        )
        parts += [_check_html(c) for c in self.checks]
        parts.append("</table>")
        for s in self.sections:
            parts += _section_html(s)
        parts.append(self._settings_html())
        return "\n".join(parts)

    def _verdict_html(self, verdict: str) -> str:
        e = html.escape
        return (
            f"<section id='verdict' class='verdict {'' if self.ok else 'disagree'}'><h2>Verdict</h2><table>"
            + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in self.headline)
            + f"<tr><th>engines</th><td class='{'ok' if self.ok else 'bad'}'>{verdict}</td></tr></table></section>"
        )

    def _settings_html(self) -> str:
        e = html.escape
        return (
            "<h2>Settings, timings, versions</h2><table>"
            + "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in self.settings.items())
            + "".join(f"<tr><th>time: {e(k)}</th><td>{v:.2f} s</td></tr>" for k, v in self.timings.items())
            + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in self.versions.items())
            + "</table></body></html>"
        )


def _check_html(c: Check) -> str:
    e = html.escape
    return (
        f"<tr><td>{e(c.name)}</td><td class='{'ok' if c.ok else 'bad'}'>{'yes' if c.ok else 'NO'}"
        f"</td><td>{e(c.detail)}</td></tr>"
    )


def _section_html(s: Section) -> list[str]:
    """A section's heading, note, rows, tables and images (inline PNG data URIs)."""
    e = html.escape
    parts = [f"<h2>{e(s.title)}</h2>"]
    if s.note:
        parts.append(f"<p class='note'>{e(s.note)}</p>")
    if s.rows:
        parts.append("<table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in s.rows) + "</table>")
    for caption, header, rows in s.tables:
        parts.append(
            f"<table><caption>{e(caption)}</caption><tr>"
            + "".join(f"<th>{e(h)}</th>" for h in header)
            + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{e(str(x))}</td>" for x in r) + "</tr>" for r in rows)
            + "</table>"
        )
    for caption, png in s.images:
        data = base64.b64encode(png).decode("ascii")
        parts.append(
            f"<figure><img alt='{e(caption)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{e(caption)}</figcaption></figure>"
        )
    return parts


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:0}.sub{color:#555;margin-top:.2em}table{border-collapse:collapse;margin:.6em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top;font-size:14px}
th{background:#f3f3f3}caption{text-align:left;font-weight:bold;padding:.3em 0}.ok{color:#16723a;font-weight:bold}
.bad{color:#b00020;font-weight:bold}.note{color:#555;font-style:italic}figure{margin:1em 0}img{max-width:100%}
.verdict{border:2px solid #16723a;border-radius:6px;padding:.2em 1em .6em;margin:1em 0;background:#f4faf6}
.verdict.disagree{border-color:#b00020;background:#fdf3f4}.verdict h2{margin:.4em 0}.verdict td{font-size:16px}"""


def fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.6g}"


def to_png(draw: Callable[[Path], Any]) -> bytes:
    with tempfile.TemporaryDirectory(prefix="rlverify-report-") as tmp:
        path = Path(tmp) / "figure.png"
        draw(path)
        return path.read_bytes()


def write_report(report: Report, path: str | Path, *, force: bool = False) -> Path:
    """Write ``report.to_html()`` to ``path`` atomically (never over an existing file without ``force``).

    Raises:
        FileWriteError: the file exists without ``force``, or cannot be written.
    """
    return write_text(path, report.to_html(), force=force, what="--out")
