"""report.html's plots and timings say what they show: rows at the cap are visible, microseconds are not 0.00."""

from __future__ import annotations

import re

import numpy as np

from drafter_contracts.report.html import CAP_BAR_MIN_WIDTH, duration, roles_svg, seq_len_svg
from drafter_contracts.checks.stats import SEQ_LEN_EDGES, seq_len_histogram


def _hist(lengths: list[int]) -> tuple[list[int], list[int]]:
    return [int(e) for e in SEQ_LEN_EDGES], seq_len_histogram(np.asarray(lengths, dtype=np.int64))


def test_rows_at_max_len_are_a_visible_bar_above_the_dashed_line():
    edges, hist = _hist([100] * 500 + [300] * 400 + [4096] * 21)
    svg = seq_len_svg(edges, hist, 10, 4096)
    cap = re.search(r'<rect class="bar cap" x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="([\d.]+)"', svg)
    assert cap, svg
    assert float(cap.group(2)) >= CAP_BAR_MIN_WIDTH and float(cap.group(3)) >= 1.5
    bound = svg.index('class="bound" x1=', svg.index("max_len") - 200)
    assert svg.index('class="bar cap"') > bound  # drawn after (over) the dashed line
    assert "21 at cap" in svg
    assert "holds max_len 4,096): 21 rows" in svg


def test_no_cap_bar_without_rows_at_the_cap():
    edges, hist = _hist([100] * 50 + [300] * 40)
    assert 'class="bar cap"' not in seq_len_svg(edges, hist, 10, 4096)


def test_durations_read_for_sub_millisecond_checks():
    assert duration(0.000043) == "43 µs"
    assert duration(0.0123) == "12.3 ms"
    assert duration(2.5) == "2.50 s"
    assert duration(0) == "–" and duration(None) == "–"


def test_roles_of_equal_share_are_drawn_in_name_order_whatever_the_hash_seed():
    # Eight roles of one share: a set's order (the hash seed's) is their name order once in 40,320.
    tied = ["user", "tool", "system", "header", "end", "outside", "assistant_end", "after_assistant_end"]
    svg = roles_svg({"assistant": 0.3, **{r: 0.0875 for r in tied}}, {})
    drawn = re.findall(r'text-anchor="end" font-size="12">([a-z_]+)</text>', svg)
    assert drawn == ["assistant", *sorted(tied)]
