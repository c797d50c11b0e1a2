"""The first line of every report: the mask convention in force and why, the template profile, the tokenizer.

Every verdict of the mask contracts is relative to the convention the rows were held to, and every
contract that reads tokens to the tokenizer and the template profile that labels its turns: a
reader who sees them first reads a failure right (a declared convention the producer never followed
fails every row; one inferred from the rows explains their majority). Read from summary.json alone,
like every report, so a run, ``merge-reports`` and an archived summary say the same.
"""

from __future__ import annotations

from typing import Any

from ..dataset.layouts import MASK_COLUMNS

#: The contracts that hold the rows to the convention: when none of them runs, the line says so.
MASK_CONTRACTS = ("mask_on_assistant_spans", "mask_covers_assistant_spans")


def headline(summary: dict[str, Any]) -> str:
    """``convention speculators-regex (declared in the contract) · template profile chatml (…) · tokenizer …``."""
    parts = (convention_words(summary), profile_words(summary), tokenizer_words(summary))
    return " · ".join(p for p in parts if p)


def convention_words(summary: dict[str, Any]) -> str:
    """The convention in force and why it was chosen, or what applies when none could be."""
    contract = summary["contract"]
    columns = summary["dataset"].get("columns")
    if columns is not None and not any(c in columns for c in MASK_COLUMNS):
        return f"no mask column (none of {', '.join(MASK_COLUMNS)}): no convention applies"
    choice = contract.get("convention_choice") or {}
    in_force = (contract.get("mask") or {}).get("convention", "custom")
    if choice.get("declared") == "auto":
        words = _inferred(choice, in_force)
    elif in_force == "custom":
        words = "convention custom: the contract's [mask] keys as written" + (
            " (no convention declared)" if choice.get("by") == "default" else "")
    else:
        by = {"contract": "declared in the contract",
              "command line": f"set with --mask-policy convention={in_force}"}.get(choice.get("by", ""))
        words = f"convention {in_force}" + (f" ({by})" if by else "")
    return words + _mask_contracts_off(summary)


def _inferred(choice: dict[str, Any], in_force: str) -> str:
    """``convention = auto``: what the first rows showed."""
    if "inferred" not in choice:
        return "convention auto, not resolved without a tokenizer"
    rows, rejected = choice.get("rows", 0), choice.get("rejected")
    if choice.get("shifted"):
        return (f"convention {in_force}, inferred from the rows (auto): {choice.get('shifted_rows', 0):,} of the "
                f"first {rows:,} rows fit it only with their loss_mask {choice['shifted']}; "
                "the mask contracts fail them")
    if rejected is None:
        return f"convention {in_force} (auto, but the first rows hold no mask to infer from)"
    if choice["inferred"] == "learnt":
        near = (f"nearest preset {choice['nearest']}, differing in {', '.join(choice.get('differs') or ['nothing'])}"
                if choice.get("nearest") else "no preset to compare")
        return f"convention learnt from the first {rows:,} rows (auto): {near}; it rejects {rejected:,} of them"
    if rejected == 0:
        return f"convention {in_force}, inferred from the rows (auto): it fits the first {rows:,} rows"
    return (f"convention {in_force}, inferred from the rows (auto): the closest built-in convention, "
            f"rejecting {rejected:,} of the first {rows:,} rows")


def _mask_contracts_off(summary: dict[str, Any]) -> str:
    """``; the mask contracts are not checked (…)`` when every one of them was skipped."""
    found = [summary["checks"][n] for n in MASK_CONTRACTS if n in summary.get("checks", {})]
    if not found or any(c["verdict"] != "skip" for c in found):
        return ""
    reasons = [r.removeprefix("not checked: ") for c in found for r in c.get("skip_reasons", [])]
    return "; the mask contracts are not checked" + (f" ({reasons[0]})" if reasons else "")


def profile_words(summary: dict[str, Any]) -> str:
    """``template profile chatml (built-in, requested; labels 34 template renderings exactly)``."""
    if not summary["tokenizer"].get("name"):
        return ""
    found = summary["tokenizer"].get("template_profile")
    if not found:
        return f"template profile {summary['contract'].get('template_profile') or 'auto'}"
    name, how = found.get("name", "?"), found.get("how", "")
    prefix = f"built-in {name} ("
    end = _closing(how, len(prefix) - 1) if how.startswith(prefix) else -1
    if end > 0:  # "built-in chatml (requested; …)": the name once, its words in one parenthesis
        how = "built-in, " + how[len(prefix):end] + how[end + 1:]
    return f"template profile {name}" + (f" ({how})" if how else "")


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one at ``start`` (-1: none does)."""
    depth = 0
    for i in range(start, len(text)):
        depth += (text[i] == "(") - (text[i] == ")")
        if depth == 0:
            return i
    return -1


def tokenizer_words(summary: dict[str, Any]) -> str:
    """``tokenizer PATH (found beside the dataset; …)``, or that there is none."""
    name = summary["tokenizer"].get("name")
    how = summary["contract"].get("tokenizer_how")
    if not name:
        return "tokenizer none (none named, none found beside the dataset)"
    return f"tokenizer {name}" + (f" ({how})" if how else "")


def clauses(text: str) -> list[str]:
    """``text`` split at its top-level "; " (a row's reasons in parentheses stay on the row's line)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and text.startswith("; ", i):
            parts.append(text[start:i])
            start = i + 2
    return parts + [text[start:]]
