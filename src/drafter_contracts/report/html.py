"""report.html: one self-contained page (inline CSS, SVG and a few lines of JS; nothing fetched).

Rendered from summary.json alone, so a merged or archived summary renders the same
page. The verdict table lists whatever checks the summary holds; plots come from
the profile's fixed-bin histograms; violating rows are drawn from excerpt segments.
"""

from __future__ import annotations

import html
import math
from typing import Any, Iterable

from ..contract_families import families
from .shared_reasons import reason_items, shared
from .headline import clauses, headline

ROLE_COLOURS = {
    "system": "#e8e3f7", "user": "#e1effa", "tool": "#fdf0d8", "assistant": "#dcf5e3", "reasoning": "#eaf7d0",
    "tool_call": "#d6f0ee", "header": "#eeeeee", "assistant_end": "#c9e9d2", "end": "#e4e4e4", "outside": "#f6f6f6",
    "after_assistant_end": "#f0f0f0", "injected": "#ffd2d2", "unknown_role": "#ffd2d2", "assistant_header": "#e8e8f4",
}
VERDICT_COLOURS = {"pass": "#1a7f37", "fail": "#cf222e", "warn": "#bc4c00", "skip": "#9a6700", "incomplete": "#8250df"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1180px;color:#1f2328;\
padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;\
padding-bottom:4px}
.headline{font-size:15px;font-weight:600;margin:6px 0}
.meta{color:#57606a;margin:2px 0} code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
table{border-collapse:collapse;width:100%} th,td{border-bottom:1px solid #eaeef2;padding:5px 8px;text-align:left;\
vertical-align:top}
th{background:#f6f8fa;font-weight:600} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;min-width:38px;text-align:center;color:#fff;border-radius:10px;padding:1px 8px;\
font-size:12px;font-weight:600}
.overall{font-size:16px;padding:3px 12px}
.plots{display:flex;flex-wrap:wrap;gap:18px} figure{margin:0;border:1px solid #d0d7de;border-radius:6px;padding:8px}
figcaption{font-size:12.5px;color:#57606a;max-width:540px}
pre.details{background:#f6f8fa;padding:10px;border-radius:6px;white-space:pre-wrap;margin:6px 0}
.row{border:1px solid #d0d7de;border-radius:6px;margin:10px 0;padding:8px}
.row .head{font-size:13px;color:#57606a;margin-bottom:6px}
.excerpt{white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,Menlo,monospace;font-size:12.5px;\
line-height:1.7}
.seg{border-radius:2px;padding:1px 0}
.seg.sup{text-decoration:underline 2px #1a7f37;font-weight:600}
.seg.off{outline:2px solid #cf222e;outline-offset:1px}
.gap{color:#888;padding:0 .4em}
.tag{font:600 10px system-ui,sans-serif;color:#57606a;background:#fff;border:1px solid #d0d7de;border-radius:3px;\
padding:0 3px;margin:0 2px;vertical-align:1px}
.legend span{margin-right:10px;padding:1px 5px;border-radius:3px;font-size:12px}
.hidden{display:none}
"""

JS = """
(function(){
  var box=document.getElementById('only-failing');
  if(box){box.addEventListener('change',function(){
    var rows=document.querySelectorAll('#verdicts tbody tr');
    for(var i=0;i<rows.length;i++){var r=rows[i];r.classList.toggle('hidden',box.checked&&r.dataset.verdict!=='fail');}
  });}
  document.documentElement.setAttribute('data-rendered','yes');
})();
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _n(v: Any, spec: str = ",") -> str:
    return "n/a" if v is None else format(v, spec)


def _badge(verdict: str, extra: str = "") -> str:
    return (f'<span class="badge {extra}" data-verdict="{_e(verdict)}" '
            f'style="background:{VERDICT_COLOURS.get(verdict, "#57606a")}">{_e(verdict.upper())}</span>')


# --- SVG plots ---------------------------------------------------------------------------------

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 540, 250, 56, 14, 14, 40
#: The bar of rows at the truncation cap is a 1/16-octave bin, narrower than the dashed max_len line.
CAP_BAR_MIN_WIDTH = 5.0


def duration(seconds: float | None) -> str:
    """Seconds as a person reads them: most checks of a clean shard take microseconds, not 0.00 s."""
    if not seconds:
        return "–"
    if seconds >= 1:
        return f"{seconds:,.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def _axis_y(ymax: int) -> list[str]:
    """Horizontal grid lines with labels at a 1/2/5 step giving three to six lines."""
    mag = 10 ** math.floor(math.log10(max(ymax, 1)))
    step = mag
    for m in (0.1, 0.2, 0.5, 1, 2, 5):
        step = max(1, int(mag * m))
        if ymax / step <= 6:
            break
    out = []
    for v in range(0, ymax + 1, step):
        y = PAD_T + (H - PAD_T - PAD_B) * (1 - v / ymax)
        out.append(f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}" stroke="#eaeef2"/>'
                   f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{v:,}</text>')
    return out


def _rows_label() -> str:
    """The rotated "rows" label of a histogram's y axis."""
    return (f'<text x="14" y="{H / 2}" transform="rotate(-90 14 {H / 2})" text-anchor="middle" '
            f'font-size="12">rows</text>')


def seq_len_svg(edges: list[int], hist: list[int], min_len: int | None, max_len: int | None) -> str:
    """Histogram of seq_len on a log x axis, with the contract's bounds drawn as dashed lines."""
    nz = [i for i, c in enumerate(hist) if c]
    if not nz:
        return "<p>no rows</p>"
    lo = min(edges[nz[0]], min_len or edges[nz[0]])
    hi = max(edges[nz[-1] + 1], (max_len or 0) * 1.15)
    llo, lhi = math.log10(max(lo, 1)) - 0.05, math.log10(hi) + 0.02
    def x(v: float) -> float:
        return PAD_L + (W - PAD_L - PAD_R) * (math.log10(max(v, 1)) - llo) / (lhi - llo)
    ymax = max(hist)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" id="plot-seq-len" '
             f'aria-label="seq_len histogram">', *_axis_y(ymax)]
    base = H - PAD_B
    # The bounds go under the bars: the bin holding max_len starts exactly on its dashed line, and
    # rows at the truncation cap are what a reader looks for first.
    for v, label, dx, anchor in ((min_len, "min_len", 3, "start"), (max_len, "max_len", -3, "end")):
        if v:
            parts.append(f'<line class="bound" x1="{x(v):.1f}" y1="{PAD_T}" x2="{x(v):.1f}" y2="{base}" '
                         f'stroke="#cf222e" stroke-dasharray="5,3" stroke-width="1.5"/>'
                         f'<text x="{x(v) + dx:.1f}" y="{PAD_T + 10}" '
                         f'text-anchor="{anchor}" font-size="11" fill="#cf222e">{label} {v:,}</text>')
    for i in nz:
        x0, x1 = x(edges[i]), x(edges[i + 1])
        h = max((H - PAD_T - PAD_B) * hist[i] / ymax, 1.5)  # a bin with rows never disappears into the axis
        at_cap = bool(max_len) and edges[i] <= max_len < edges[i + 1]
        if at_cap:  # wide enough to see beside the dashed line, in the bound's colour
            width = max(x1 - x0 - 0.5, CAP_BAR_MIN_WIDTH)
            parts.append(f'<rect class="bar cap" x="{x0:.1f}" y="{base - h:.1f}" width="{width:.1f}" '
                         f'height="{h:.1f}" fill="#fa4549" stroke="#82071e" stroke-width="0.6">'
                         f'<title>{edges[i]:,}..{edges[i + 1] - 1:,} '
                         f'tokens (holds max_len {max_len:,}): {hist[i]:,} rows</title></rect>'
                         f'<text class="cap-count" x="{x0 - 3:.1f}" y="{max(base - h - 3, PAD_T + 24):.1f}" '
                         f'text-anchor="end" font-size="11" fill="#82071e">{hist[i]:,} at cap</text>')
            continue
        parts.append(f'<rect class="bar" x="{x0:.1f}" y="{base - h:.1f}" width="{max(x1 - x0 - 0.5, 0.8):.1f}" '
                     f'height="{h:.1f}" fill="#54aeff"><title>{edges[i]:,}..{edges[i + 1] - 1:,} tokens: '
                     f'{hist[i]:,} rows</title></rect>')
    decade = 10 ** math.floor(llo)
    while decade <= hi:
        for m in (1, 2, 5):
            v = decade * m
            if lo * 0.9 <= v <= hi:
                parts.append(f'<line x1="{x(v):.1f}" y1="{base}" x2="{x(v):.1f}" y2="{base + 4}" stroke="#57606a"/>'
                             f'<text x="{x(v):.1f}" y="{base + 16}" text-anchor="middle" font-size="11">{v:,}</text>')
        decade *= 10
    parts.append(f'<line x1="{PAD_L}" y1="{base}" x2="{W - PAD_R}" y2="{base}" stroke="#57606a"/>'
                 f'<text x="{(W + PAD_L) / 2}" y="{H - 6}" text-anchor="middle" font-size="12">'
                 f'seq_len (tokens, log scale)</text>{_rows_label()}</svg>')
    return "".join(parts)


def share_svg(hist: list[int]) -> str:
    """Histogram of the per-row supervised-token share, 0..1."""
    if not any(hist):
        return "<p>no rows</p>"
    ymax, n, base = max(hist), len(hist), H - PAD_B
    bw = (W - PAD_L - PAD_R) / n
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" id="plot-supervised-share" '
             f'aria-label="supervised share histogram">', *_axis_y(ymax)]
    for i, c in enumerate(hist):
        if c:
            h = (H - PAD_T - PAD_B) * c / ymax
            parts.append(f'<rect class="bar" x="{PAD_L + i * bw:.1f}" y="{base - h:.1f}" width="{bw - 1:.1f}" '
                         f'height="{h:.1f}" fill="#4ac26b">'
                         f'<title>{i / n:.0%}..{(i + 1) / n:.0%} supervised: {c:,} rows</title></rect>')
    for t in range(0, 11, 2):
        xx = PAD_L + (W - PAD_L - PAD_R) * t / 10
        parts.append(f'<text x="{xx:.1f}" y="{base + 16}" text-anchor="middle" font-size="11">{t * 10}%</text>')
    parts.append(f'<line x1="{PAD_L}" y1="{base}" x2="{W - PAD_R}" y2="{base}" stroke="#57606a"/>'
                 f'<text x="{(W + PAD_L) / 2}" y="{H - 6}" text-anchor="middle" font-size="12">'
                 f'supervised tokens / row length</text>{_rows_label()}</svg>')
    return "".join(parts)


def roles_svg(all_tokens: dict[str, float], supervised: dict[str, float]) -> str:
    """Token share by role: all tokens and supervised tokens, side by side."""
    # Ties by name: a set's order changes with the interpreter's hash seed, the page must not.
    roles = sorted(set(all_tokens) | set(supervised), key=lambda r: (-all_tokens.get(r, 0), r))
    if not roles:
        return "<p>no role labels (no tokenizer)</p>"
    row_h, left = 24, 140
    h = PAD_T + row_h * len(roles) + 34
    width = W - left - 60
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" role="img" id="plot-roles" '
             f'aria-label="token share by role">']
    for k, r in enumerate(roles):
        y = PAD_T + k * row_h
        a, s = all_tokens.get(r, 0.0), supervised.get(r, 0.0)
        parts.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end" font-size="12">{_e(r)}</text>'
                     f'<rect class="bar" x="{left}" y="{y + 2}" width="{width * a:.1f}" height="9" fill="#8c959f">'
                     f'<title>{_e(r)}: {a:.2%} of all tokens</title></rect>'
                     f'<rect class="bar" x="{left}" y="{y + 12}" width="{width * s:.1f}" height="9" fill="#1a7f37">'
                     f'<title>{_e(r)}: {s:.2%} of supervised tokens</title></rect>'
                     f'<text x="{left + width * max(a, s) + 4:.1f}" y="{y + 15}" font-size="11">'
                     f'{a:.1%} / {s:.1%}</text>')
    y = PAD_T + row_h * len(roles) + 14
    parts.append(f'<rect x="{left}" y="{y}" width="10" height="9" fill="#8c959f"/>'
                 f'<text x="{left + 14}" y="{y + 9}" font-size="11">share of all tokens</text>'
                 f'<rect x="{left + 140}" y="{y}" width="10" height="9" fill="#1a7f37"/>'
                 f'<text x="{left + 154}" y="{y + 9}" font-size="11">share of supervised tokens</text></svg>')
    return "".join(parts)


# --- excerpts ----------------------------------------------------------------------------------


#: Roles whose tokens speak for themselves (markers): no tag in front of them.
_UNTAGGED = {"header", "assistant_header", "end", "assistant_end", "outside", "after_assistant_end"}


def render_segments(segments: Iterable[dict[str, Any]]) -> str:
    """Draw a list of ``{"text", "role", "supervised", "offending"}`` segments (the excerpt interface)."""
    out = []
    last_role = None
    last_end = None
    for seg in segments:
        if last_end is not None and seg.get("start", last_end) != last_end:
            out.append('<span class="gap" title="tokens left out">…</span>')
        last_end = seg.get("end")
        role = seg.get("role") or ""
        if role and role != last_role and role not in _UNTAGGED:
            out.append(f'<span class="tag">{_e(role)}</span>')
        last_role = role
        cls = "seg" + (" sup" if seg.get("supervised") else "") + (" off" if seg.get("offending") else "")
        title = f"role {role or 'n/a'} · loss_mask {'1' if seg.get('supervised') else '0'}" + (
            " · offending token" if seg.get("offending") else "")
        text = str(seg.get("text", "")).replace("\n", "⏎\n")
        out.append(f'<span class="{cls}" data-role="{_e(role)}" style="background:{ROLE_COLOURS.get(role, "#fff")}" '
                   f'title="{_e(title)}">{_e(text)}</span>')
    return "".join(out)


def _legend() -> str:
    roles = ("system", "user", "tool", "assistant", "reasoning", "tool_call", "header", "injected")
    items = "".join(f'<span style="background:{ROLE_COLOURS[r]}">{r}</span>' for r in roles)
    return (f'<p class="legend">{items}<span class="seg sup">underlined bold: loss_mask = 1</span>'
            f'<span class="seg off">outlined: offending tokens</span> ⏎ newline</p>')


def _rows(checks: dict[str, Any], verdict: str, nothing: str) -> str:
    """The decoded rows of the contracts with ``verdict``: a failing contract's violations, or a warning's rows
    (which fail nothing: a page that listed them as violations would overstate the run)."""
    blocks = []
    for name, c in checks.items():
        if c["verdict"] != verdict:
            continue
        shown = [ex for ex in c.get("examples", []) if ex.get("excerpt")]
        if not shown and not c.get("examples"):
            continue
        blocks.append(f'<h3 id="rows-{_e(name)}">{_e(name)} <small>{c["rows_violating"]:,} rows</small></h3>')
        for ex in shown:
            x = ex["excerpt"]
            where = f"token {ex['position']}" if ex["position"] >= 0 else "whole row"
            head = f"row {ex['row']:,} · {where} · {_e(ex['reason'])}"
            if "error" in x:
                blocks.append(f'<div class="row"><div class="head">{head}</div><em>{_e(x["error"])}</em></div>')
                continue
            span = f" · tokens {x['start']:,}..{x['stop']:,} of {x['length']:,}"
            runs = x.get("offending_span_count", 0)
            if runs > 1:
                listed = ", ".join(f"{a:,}–{b - 1:,}" for a, b in x.get("offending_spans", [])[:12])
                span += f" · {runs:,} offending spans: {_e(listed)}{' …' if runs > 12 else ''}"
            more = "…" if x["start"] > 0 else ""
            tail = "…" if x["stop"] < x["length"] else ""
            blocks.append(f'<div class="row"><div class="head">{head}{span}</div>'
                          f'<div class="excerpt">{more}{render_segments(x["segments"])}{tail}</div></div>')
        rest = [ex for ex in c.get("examples", []) if not ex.get("excerpt")]
        if rest:
            blocks.append("<p>more rows: " + ", ".join(f"{ex['row']:,} ({_e(ex['reason'])})" for ex in rest) + "</p>")
    if not blocks:
        return f"<p>{nothing}</p>"
    return _legend() + "".join(blocks)


# --- the page ----------------------------------------------------------------------------------


def _check_detail(name: str, c: dict[str, Any], checks: dict[str, Any], together: dict[str, list[str]]) -> str:
    if c["verdict"] in ("fail", "warn"):
        parts = [_e(m) for m in c["messages"]]
        parts += [_e(item) for item in reason_items(name, c, checks, together)]
        return "<br>".join(parts) or f"{c['rows_violating']:,} rows violate"
    if c["verdict"] == "skip":
        return "skipped: " + _e("; ".join(c["skip_reasons"]))
    if c["verdict"] == "incomplete":
        return "not every shard checked: " + "<br>".join(_e(m) for m in c["messages"])
    return ""


def _unchecked(summary: dict[str, Any]) -> str:
    """The shards the run set out to check but did not, each with its rows and why."""
    items, silent = summary.get("unchecked") or [], summary.get("unreported") or []
    if not items and not silent:
        return ""
    rows = "".join(f'<tr><td><code>{_e(u["shard"])}</code></td>'
                   f'<td class="num">{u["rows"][0]:,}..{u["rows"][1] - 1:,}</td>'
                   f'<td>{_e(u["reason"])}</td></tr>' for u in items)
    rows += "".join(f'<tr><td><code>{_e(u["test"].rsplit("::", 1)[-1])}</code></td><td>no verdict</td>'
                    f'<td>{_e(u["reason"])}</td></tr>' for u in silent)
    return (f'<h2 id="unchecked">Not checked</h2><p>{len(items)} shard(s) and {len(silent)} contract test(s) '
            f'did not report: the contracts concerned are incomplete.</p>'
            f'<table><thead><tr><th>shard or test</th><th>rows</th><th>why</th></tr></thead>'
            f'<tbody>{rows}</tbody></table>')


def _overall(summary: dict[str, Any], failed: list[str]) -> str:
    """The page's one word: fail on a failing contract or exit status, incomplete when a contract is."""
    overall = "fail" if failed or summary.get("exit_status") not in (0, None) else "pass"
    if overall == "pass" and any(c["verdict"] == "incomplete" for c in summary["checks"].values()):
        overall = "incomplete"
    return overall


def _verdict_rows(summary: dict[str, Any]) -> str:
    """One row per contract: verdict, tests, rows, its time and what it found."""
    seconds = (summary.get("timing") or {}).get("per_check_seconds") or {}
    rows = []
    together = shared(summary["checks"])
    for name, c in summary["checks"].items():
        rows.append(f'<tr data-verdict="{_e(c["verdict"])}"><td>{_badge(c["verdict"])}</td>'
                    f'<td><code>{_e(name)}</code></td>'
                    f'<td class="num">{c["tests"]:,}</td>'
                    f'<td class="num">{c["rows_checked"]:,} {_e(c.get("unit", "rows"))}</td>'
                    f'<td class="num">{c["rows_violating"]:,}</td><td class="num" title="{seconds.get(name, 0):.6f} s">'
                    f'{duration(seconds.get(name))}</td>'
                    f'<td>{_check_detail(name, c, summary["checks"], together)}</td></tr>')
    return "".join(rows)


def _plots(summary: dict[str, Any]) -> str:
    """The seq_len and supervised-share histograms (when the profile has them) and the role shares."""
    prof, contract = summary.get("profile") or {}, summary["contract"]
    seq = prof.get("seq_len") or {}
    share = prof.get("supervised_share_per_row") or {}
    plots = []
    if seq.get("histogram"):
        q = seq.get("quantiles") or {}
        svg = seq_len_svg(seq["bin_edges"], seq["histogram"], contract.get("min_len"), contract.get("max_len"))
        plots.append(f'<figure>{svg}'
                     f'<figcaption>seq_len per row, {seq.get("bins_per_octave")} bins per octave; '
                     f'dashed: contract bounds. '
                     f'p05 {_n(q.get("p05"))} · p50 {_n(q.get("p50"))} · p95 {_n(q.get("p95"))} '
                     f'· p99 {_n(q.get("p99"))} (bin lower edges)</figcaption></figure>')
    if share.get("histogram"):
        plots.append(f'<figure>{share_svg(share["histogram"])}<figcaption>Share of each row\'s tokens with '
                     f'loss_mask = 1 ({share.get("bins")} bins). '
                     f'Overall {_n(prof.get("supervised_share"), ".2%")}.</figcaption></figure>')
    plots.append(f'<figure>{roles_svg(prof.get("role_token_shares") or {}, prof.get("role_supervised_shares") or {})}'
                 f'<figcaption>Token share by role (span oracle labels): grey over all tokens, green over supervised '
                 f'tokens.</figcaption></figure>')
    return "".join(plots)


def _figures(summary: dict[str, Any]) -> str:
    """The dataset's headline figures as a two-column table."""
    f, ds = summary["figures"], summary["dataset"]
    seq_len = f"{_n(f.get('seq_len_min'))} / {_n(f.get('seq_len_mean'), ',.1f')} / {_n(f.get('seq_len_max'))}"
    figures = [("rows", _n(ds.get("num_rows"))), ("tokens", _n(f.get("tokens"))),
               ("seq_len min / mean / max", seq_len),
               ("rows at max_len", _n(f.get("rows_at_max_len"))),
               ("supervised tokens", f"{_n(f.get('supervised_tokens'))} ({_n(f.get('supervised_share'), '.2%')})"),
               ("shards covered", f"{f.get('shards_covered')} of {f.get('shards_total')}")]
    return "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in figures)


def _headline(summary: dict[str, Any]) -> str:
    """The page's first line, as the terminal's (``headline.py``), and how the mask policy was resolved."""
    how = summary["contract"].get("mask_how") or ""
    steps = "".join(f"<li>{_e(part)}</li>" for part in clauses(how)) if how else ""
    return (f'<p class="headline" id="headline">{_e(headline(summary))}</p>'
            + (f'<details class="meta"><summary>mask policy</summary><ul>{steps}</ul></details>' if steps else ""))


def _meta(summary: dict[str, Any]) -> str:
    """The two lines under the title: what was checked, with what, how long, and the exit status."""
    contract, ds, tok = summary["contract"], summary["dataset"], summary["tokenizer"]
    files = ", ".join(f'{_e(x["name"])} ({x["bytes"]:,} B)' if isinstance(x, dict) else _e(x)
                      for x in ds.get("files", []))
    timing = summary.get("timing", {})
    split = " split " + _e(ds["split"]) if ds.get("split") else ""
    return f"""<p class="meta">dataset <code>{_e(ds.get("path"))}</code>{split} · files {files}</p>
<p class="meta">contract <code>{_e(contract.get("name"))}</code> ({_e(contract.get("source"))}) \
· tokenizer <code>{_e(tok.get("name"))}</code>
 (vocab {_e(tok.get("vocab_fingerprint"))}, template {_e(tok.get("template_fingerprint"))}) \
· wall {_n(timing.get("wall_seconds"), ".1f")} s
 · schema v{_e(summary.get("schema_version"))} · exit status {_e(summary.get("exit_status"))}</p>"""


def render(summary: dict[str, Any]) -> str:
    """The whole page, from summary.json alone."""
    checks = summary["checks"]
    failed = [n for n, c in checks.items() if c["verdict"] == "fail"]
    overall = _overall(summary, failed)
    details = "".join(f'<h3>{_e(n)}</h3><pre class="details">{_e(chr(10).join(c["details"]))}</pre>'
                      for n, c in checks.items() if c.get("details"))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>drafter-contracts: {_e(summary["contract"].get("name"))} · {overall.upper()}</title><style>{CSS}</style></head>
<body>
<h1>drafter-contracts report {_badge(overall, "overall")}</h1>
{_headline(summary)}
{_meta(summary)}
<h2>Verdicts</h2>
<p><label><input type="checkbox" id="only-failing"> show failing contracts only</label> \
· {len(failed)} of {len(checks)} contracts fail</p>
<table id="verdicts"><thead><tr><th>verdict</th><th>contract</th><th>tests</th><th>checked</th>\
<th>rows violating</th>
<th>time</th><th>detail</th></tr></thead><tbody>{_verdict_rows(summary)}</tbody></table>
{details}
{_unchecked(summary)}
<h2>Dataset</h2><table class="figures">{_figures(summary)}</table>
<h2>Plots</h2><div class="plots">{_plots(summary)}</div>
{_family_sections(summary, "dataset")}
<h2 id="violating-rows">Violating rows</h2>{_rows(checks, "fail", "No violating rows.")}
<h2 id="warning-rows">Rows to look at (warnings)</h2>{_rows(checks, "warn", "No warnings.")}
{_family_sections(summary, "end")}
<script>{JS}</script>
</body></html>
"""


def _family_sections(summary: dict[str, Any], place: str) -> str:
    """The contract families' own sections for this place of the page (``ContractFamily.html_place``)."""
    return "\n".join(f.html_section(summary) for f in families()
                     if f.html_section is not None and f.html_place == place)
