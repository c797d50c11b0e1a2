"""The hidden-state part of the terminal summary and of report.html, read from summary.json alone.

Reports read results, never the files: what was checked against what is ``hidden_states``
(the folder, the declared shape), what the passes read is ``figures.contract_figures.hs_header``
(summed over shards by the reducer, so a merged summary has the parts' sum), the norm plot
draws the quantiles the controller learnt (``checks.hs_layer_norms.figures.norms``), and the
rows come from the contracts' examples.
"""

from __future__ import annotations

import html
import math
from typing import Any

from .checks import ALL_CHECKS, HEADER, LAYER_NORMS

LAYER_COLOURS = ("#0969da", "#1a7f37", "#bc4c00", "#8250df", "#cf222e", "#116329", "#9a6700", "#57606a")


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{int(n):,} B"
        n /= 1000
    return f"{n:.1f} TB"


def section(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The hidden-state figures of a summary in one place (None: the run had no hidden-states folder)."""
    h = summary.get("hidden_states")
    if not h:
        return None
    f = (summary.get("figures") or {}).get("contract_figures", {}).get(HEADER) or {}
    files, hb, vb = int(f.get("files", 0)), int(f.get("header_bytes", 0)), int(f.get("value_bytes", 0))
    hs, vs = float(f.get("header_seconds", 0.0)), float(f.get("value_seconds", 0.0))
    wall = (f["ended_last"] - f["started_first"]) if "ended_last" in f else None
    norms = ((summary.get("checks") or {}).get(LAYER_NORMS) or {}).get("figures", {}).get("norms") or {}
    return {**h, "files": files, "header_bytes": hb, "value_bytes": vb, "header_seconds": hs, "value_seconds": vs,
            "header_files_per_second": files / hs if hs else None, "value_bytes_per_second": vb / vs if vs else None,
            # from the first shard's start to the last one's end, over every worker: the passes' own wall time
            "shards_wall_seconds": wall if wall and wall > 0 else None, "norms": norms}


def terminal_lines(summary: dict[str, Any]) -> list[str]:
    """How many files and bytes each pass read, and at what rate (per worker: seconds are the shards' own)."""
    h = section(summary)
    if h is None:
        return []
    lines = [f"hidden states {h['folder']}: {h['files']:,} files, declared {h['declared']}"]
    rate = h.get("header_files_per_second")
    lines.append(f"  header pass: {_size(h['header_bytes'])} read, {h['header_seconds']:.2f} worker-s"
                 + (f" ({rate:,.0f} files/s per worker)" if rate else ""))
    if h.get("values"):
        bps = h.get("value_bytes_per_second")
        lines.append(f"  value pass: {_size(h['value_bytes'])} read, {h['value_seconds']:.2f} worker-s"
                     + (f" ({_size(bps)}/s per worker)" if bps else "")
                     + (f"; {_size(h['value_bytes'] / h['shards_wall_seconds'])}/s over the shards' "
                        f"{h['shards_wall_seconds']:.1f} s wall" if h.get("shards_wall_seconds") else ""))
    else:
        lines.append("  value pass: off (headers only)")
    return lines


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def norm_svg(norms: dict[str, Any], width: int = 540, height: int = 260) -> str:
    """Median norm per layer over position buckets (log scale), with the p05-p95 band of the rows."""
    q = norms.get("quantiles") or {}
    med, lo, hi = q.get("p50") or [], q.get("p05") or [], q.get("p95") or []
    edges = norms.get("bucket_edges") or []
    values = [v for layer in (lo + hi) for v in layer if v]
    if not med or not values:
        return "<p>No norms (no value pass, or no readable file).</p>"
    ymin, ymax = math.log10(min(values)) - 0.1, math.log10(max(values)) + 0.1
    pl, pr, pt, pb = 56, 110, 14, 40
    nb = max(len(b) for b in med)

    def x(i: float) -> float:
        return pl + (width - pl - pr) * (i + 0.5) / nb

    def y(v: float) -> float:
        return pt + (height - pt - pb) * (1 - (math.log10(v) - ymin) / (ymax - ymin or 1))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="per-layer norm distribution" class="hs-norms">']
    for k in range(math.floor(ymin), math.ceil(ymax) + 1):
        v = 10.0 ** k
        if ymin <= k <= ymax:
            parts.append(f'<line x1="{pl}" x2="{width - pr}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eaeef2"/>'
                         f'<text x="{pl - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end">{v:g}</text>')
    for i in range(nb):
        label = f"{edges[i]}+" if i + 1 >= len(edges) else (f"{edges[i]}" if edges[i + 1] - edges[i] == 1
                                                                 else f"{edges[i]}-{edges[i + 1] - 1}")
        parts.append(f'<text x="{x(i):.1f}" y="{height - pb + 16}" font-size="10" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{(pl + width - pr) / 2:.0f}" y="{height - 6}" font-size="11" text-anchor="middle">'
                 f'position bucket</text>')
    for layer, series in enumerate(med):
        colour = LAYER_COLOURS[layer % len(LAYER_COLOURS)]
        pts = [(i, v) for i, v in enumerate(series) if v]
        band = [(i, lo[layer][i], hi[layer][i]) for i, _ in pts if lo[layer][i] and hi[layer][i]]
        if band:
            poly = " ".join(f"{x(i):.1f},{y(h):.1f}" for i, _, h in band) + " " + " ".join(
                f"{x(i):.1f},{y(l_):.1f}" for i, l_, _ in reversed(band))
            parts.append(f'<polygon points="{poly}" fill="{colour}" fill-opacity="0.15" stroke="none"/>')
        parts.append(f'<polyline points="{" ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in pts)}" fill="none" '
                     f'stroke="{colour}" stroke-width="2" data-layer="{layer}"/>')
        last = pts[-1] if pts else (0, 1.0)
        name = "last" if layer == len(med) - 1 else f"aux {layer}"
        parts.append(f'<text x="{width - pr + 6}" y="{y(last[1]) + 4:.1f}" font-size="11" fill="{colour}">'
                     f'layer {layer} ({name})</text>')
    parts.append("</svg>")
    return "".join(parts)


def html_section(summary: dict[str, Any]) -> str:
    """The report's hidden-states block: what was read, the norm plot, the offending rows per contract."""
    h = section(summary)
    if h is None:
        return ""
    rows = []
    for name in ALL_CHECKS:
        c = summary["checks"].get(name)
        if not c or c["verdict"] not in ("fail", "warn") or not c.get("examples"):
            continue
        items = "".join(f'<li><code>row {e["row"]:,}</code>'
                        + (f' · position {e["position"]:,}' if e["position"] >= 0 else "")
                        + f' · {_e(e["reason"])}</li>' for e in c["examples"])
        more = (f"<p>… {c['rows_violating'] - len(c['examples']):,} more rows</p>"
                if c["rows_violating"] > len(c["examples"]) else "")
        rows.append(f'<h3 id="hs-rows-{_e(name)}">{_e(name)} <small>{c["rows_violating"]:,} rows</small></h3>'
                    f'<ul class="hs-rows">{items}</ul>{more}')
    read = (f"{h['files']:,} files · header pass {_size(h['header_bytes'])} in {h['header_seconds']:.2f} worker-s"
            + (f" · value pass {_size(h['value_bytes'])} in {h['value_seconds']:.2f} worker-s"
               f" ({_size(h['value_bytes_per_second'] or 0)}/s per worker)"
               if h.get("values") else " · value pass off"))
    n = (h.get("norms") or {}).get("rows")
    return (f'<h2 id="hidden-states">Hidden states</h2><p class="meta">folder <code>{_e(h["folder"])}</code> · '
            f'declared {_e(h["declared"])}</p><p class="meta">{_e(read)}</p>'
            f'<div class="plots"><figure>{norm_svg(h.get("norms") or {})}<figcaption>Per-layer norm of the hidden '
            f'states by position bucket over {n or 0:,} rows: median (line) and p05-p95 of the rows (band), the '
            f'bounds hs_layer_norms and hs_norm_outliers learnt.</figcaption></figure></div>'
            + ("".join(rows) or "<p>No offending rows.</p>"))
