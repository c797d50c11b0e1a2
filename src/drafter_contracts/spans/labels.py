"""Token role labels shared by every template family, and the structural problems they reveal.

A labeller turns a shard's flat ids into one ``uint8`` label per token; checks and
explanations only ever see these codes, so a new template family adds a labeller
and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np


class Role(IntEnum):
    OUTSIDE = 0  # between turns (the newline after an end marker) or before the first header
    HEADER = 1  # turn opener: marker, role name, newline
    SYSTEM = 2
    USER = 3
    TOOL = 4  # tool-response turn content (Qwen puts tool output inside a user turn)
    ASSISTANT = 5  # assistant content
    REASONING = 6  # <think> ... </think>
    TOOL_CALL = 7  # <tool_call> ... </tool_call>
    ASSISTANT_END = 8  # end marker of an assistant turn
    END = 9  # end marker of any other turn
    AFTER_ASSISTANT_END = 10  # the newline right after an assistant end marker
    INJECTED = 11  # content of a header that opened inside an open turn (special-token text in content)
    UNKNOWN_ROLE = 12  # content of a turn whose role the family does not define
    #: Header of an assistant turn, or of a later block of one assistant message (harmony's
    #: ``<|start|>assistant<|channel|>final<|message|>`` after an analysis block). Kept apart from
    #: HEADER because conventions differ on it: a generation prompt holds only part of some
    #: headers, and some training templates tag the whole header as generated.
    ASSISTANT_HEADER = 13


#: Short names used in explanations and summary.json.
ROLE_NAMES = {r: r.name.lower() for r in Role}
ASSISTANT_PARTS = (Role.ASSISTANT, Role.REASONING, Role.TOOL_CALL)


class TurnProblem(IntEnum):
    """Per-token structural violations found while labelling (0 = none)."""

    NONE = 0
    NO_LEADING_HEADER = 1
    HEADER_IN_OPEN_TURN = 2
    STRAY_END = 3
    UNKNOWN_ROLE = 4
    MALFORMED_HEADER = 5
    TEXT_OUTSIDE_TURN = 6
    UNCLOSED_TURN = 7
    MISPLACED_BOS = 8


TURN_PROBLEM_TEXT = {
    TurnProblem.NO_LEADING_HEADER: "row does not open with a turn header",
    TurnProblem.HEADER_IN_OPEN_TURN: "turn header inside an open turn (special-token text pasted into content?)",
    TurnProblem.STRAY_END: "end marker with no open turn",
    TurnProblem.UNKNOWN_ROLE: "turn header with an unknown role",
    TurnProblem.MALFORMED_HEADER: "turn header not closed by a newline",
    TurnProblem.TEXT_OUTSIDE_TURN: "tokens between turns",
    TurnProblem.UNCLOSED_TURN: "row shorter than max_len ends inside an open turn (silently truncated turn?)",
    TurnProblem.MISPLACED_BOS: "begin-of-sequence token inside a row (BOS added twice, or rows concatenated?)",
}


@dataclass
class Labels:
    """Roles of every token of a shard view, aligned with its flat ids."""

    role: np.ndarray  # uint8 per token, values of Role
    boundary: np.ndarray  # bool per token: header newline merged with content whitespace
    problem: np.ndarray  # uint8 per token, values of TurnProblem
    #: First position of each role run (a new run at every role change and row start), when the
    #: labeller noted them as it went (the compiled one); else checks.content.role_runs finds them.
    run_starts: np.ndarray | None = None
    #: Noted by the same labeller as it writes: each run's role and whether it opens a row, the
    #: boundary tokens' positions and how many tokens carry a problem (scans of the shard spared).
    run_roles: np.ndarray | None = None
    run_row_first: np.ndarray | None = None
    boundary_at: np.ndarray | None = None
    problem_count: int | None = None
