"""The draft-vocabulary block of report.html, read from summary.json alone (``draft_vocab_coverage``'s figures)."""

from __future__ import annotations

import html
from typing import Any

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 540, 220, 48, 12, 12, 40


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def rows_svg(hist: list[int], bins: int, threshold: float | None) -> str:
    """Rows by the share of their supervised tokens the draft vocabulary covers: 5% bins, then "100%"."""
    if not any(hist):
        return "<p>no rows with supervised tokens</p>"
    ymax, n, base = max(hist), len(hist), H - PAD_B
    bw = (W - PAD_L - PAD_R) / n
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
             f'id="plot-draft-coverage-rows" aria-label="per-row draft vocabulary coverage">',
             f'<text x="{PAD_L - 4}" y="{PAD_T + 10}" text-anchor="end" font-size="11">{ymax:,}</text>',
             f'<text x="{PAD_L - 4}" y="{base}" text-anchor="end" font-size="11">0</text>']
    for i, c in enumerate(hist):
        if not c:
            continue
        h = (H - PAD_T - PAD_B) * c / ymax
        label = "100%" if i == bins else f"{i / bins:.0%}..{(i + 1) / bins:.0%}"
        colour = "#1a7f37" if i == bins else ("#cf222e" if threshold is not None and (i + 1) / bins <= threshold
                                              else "#0969da")
        parts.append(f'<rect class="bar" x="{PAD_L + i * bw:.1f}" y="{base - h:.1f}" width="{bw - 1:.1f}" '
                     f'height="{h:.1f}" fill="{colour}"><title>{label} covered: {c:,} rows</title></rect>')
    for t in range(0, bins + 1, 4):
        x = PAD_L + bw * t
        parts.append(f'<text x="{x:.1f}" y="{base + 14}" text-anchor="middle" font-size="11">{t / bins:.0%}</text>')
    parts.append(f'<text x="{PAD_L + bw * (bins + 0.5):.1f}" y="{base + 26}" text-anchor="middle" font-size="10">'
                 f'all</text><line x1="{PAD_L}" y1="{base}" x2="{W - PAD_R}" y2="{base}" stroke="#57606a"/>'
                 f'<text x="{(W + PAD_L) / 2}" y="{H - 4}" text-anchor="middle" font-size="12">share of the row\'s '
                 f'supervised tokens in the draft vocabulary</text></svg>')
    return "".join(parts)


def roles_table(overall: float, by_role: dict[str, dict[str, Any]]) -> str:
    body = "".join(f'<tr><td>{_e(role)}</td><td class="num">{v["supervised"]:,}</td>'
                   f'<td class="num">{v["covered"]:,}</td><td class="num">{v["share"]:.3%}</td></tr>'
                   for role, v in by_role.items())
    return (f'<table class="figures" id="draft-coverage-roles"><thead><tr><th>supervised tokens</th><th>total</th>'
            f'<th>in the draft vocabulary</th><th>share</th></tr></thead><tbody>{body}'
            f'<tr><th>overall</th><td></td><td></td><td class="num">{overall:.3%}</td></tr></tbody></table>')


def html_section(summary: dict[str, Any]) -> str:
    """Coverage overall, per role, and per row; nothing when the run checked no mapping."""
    c = (summary.get("checks") or {}).get("draft_vocab_coverage") or {}
    f = c.get("figures")
    if not f:
        return ""
    threshold = f.get("min_row_coverage")
    return (f'<h2 id="draft-vocabulary">Draft vocabulary</h2><p class="meta">{f["draft_vocab_size"]:,} draft ids cover '
            f'{f["covered"]:,} of {f["supervised"]:,} supervised tokens ({f["overall"]:.3%})'
            + (f' · min_coverage {f["min_coverage"]:.3%}' if f.get("min_coverage") is not None else "")
            + (f' · min_row_coverage {threshold:.1%}: {f["rows_below"]:,} rows below' if threshold is not None else "")
            + f'</p>{roles_table(f["overall"], f.get("by_role") or {})}<div class="plots"><figure>'
            f'{rows_svg(f["row_hist"], f["row_bins"], threshold)}<figcaption>Rows by the share of their supervised '
            f'tokens inside the draft vocabulary ({f["rows"]:,} rows with supervised tokens; green: covered entirely; '
            f'red: below min_row_coverage). A token outside it is never predicted by the drafter.</figcaption>'
            f'</figure></div>')
