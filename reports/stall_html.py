"""The stall section of the HTML report: the causes of a launch's stall (who acts, the fix), then the ranks grouped by
where they wait, one stack shown per group. Reads only the document's ``stall`` section (dsv3_preflight/stall/report.py);
every string is escaped here."""
from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any


def _cause(c: Mapping[str, Any]) -> str:
    evidence = "".join(f"{escape(str(e))}\n" for e in c.get("evidence") or [])
    fix = escape(str(c.get("fix") or ""))
    return (f'<article class="card finding st-border-fail"><h3>{escape(str(c.get("title", "")))} '
            f'<code>{escape(str(c.get("id", "")))}</code></h3>'
            f'<p class="summary">{escape(str(c.get("summary", "")))}</p>'
            f'<p><b>who acts:</b> {escape(str(c.get("actor_label") or "not said (no rank stands out)"))}</p>'
            + (f'<pre class="log">{evidence}</pre>' if evidence else "")
            + (f'<p><b>fix</b> (paste as is):</p><pre class="fix"><code>{fix}</code></pre>' if fix else "")
            + "</article>")


def _group(g: Mapping[str, Any]) -> str:
    ranks = ", ".join(str(r) for r in g.get("ranks") or [])
    stack = "".join(f"{escape(str(f))}\n" for f in g.get("stack") or [])
    return (f"<tr><td>{escape(ranks)}</td><td>{escape(str(g.get('site', '')))}</td>"
            f"<td>rank {escape(str(g.get('example_rank')))}<pre class=\"log\">{stack}</pre></td></tr>")


def render_stall_section(stall: Mapping[str, Any]) -> str:
    """``<section id="stall">`` for the document's ``stall`` section."""
    head = (f"no progress for {stall.get('quiet_for_s')} s in the {escape(str(stall.get('phase', '')))} phase "
            f"(threshold {stall.get('threshold_s')} s; on stall: {escape(str(stall.get('action', 'report')))})")
    last = stall.get("last_progress")
    return ('<section id="stall"><h2>Stall watch: the launched run stalled</h2>'
            f'<p class="summary">{head}</p>'
            + (f"<p>last progress: <code>{escape(str(last))}</code></p>" if last else "")
            + "".join(_cause(c) for c in stall.get("causes") or [])
            + "<h3>Ranks grouped by where they wait (one stack per group)</h3>"
            '<div class="scroll"><table class="ev"><thead><tr><th scope="col">ranks</th><th scope="col">where</th>'
            '<th scope="col">stack</th></tr></thead><tbody>'
            + "".join(_group(g) for g in stall.get("groups") or [])
            + "</tbody></table></div></section>\n")


def with_stall_section(page: str, doc: Mapping[str, Any]) -> str:
    """The page with the stall section before ``</main>`` when the document has one."""
    stall = doc.get("stall")
    if not isinstance(stall, Mapping) or "</main>" not in page:
        return page
    at = page.rindex("</main>")
    return page[:at] + render_stall_section(stall) + page[at:]
