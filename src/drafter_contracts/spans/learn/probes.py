"""Every probe set of the template learning: the conversations a template is rendered on, and their variants.

- :data:`PROBES`: the conversations a profile is verified on (``verify.py``), the generation tags read
  on (``tags.py``), with :data:`OPTIONAL` the ones a profile may fail and still be used; :data:`EVIDENCE`
  the conversations that only show a relaxation is needed (``verify.tighten``); :data:`SWITCHES` the
  template switches each is also rendered under.
- :data:`PROMPT_CONTEXTS`: the conversations the generation prompt is cut after (``resolve.generation_prompts``).
- The derivation's sentinel words and tool (``derive.py``): letter-only contents whose tokens mark where each
  role's headers and footers are.
- The variants a template may need a probe in: :func:`string_args`, :func:`fixed_length_ids`,
  :func:`content_parts`.

Nothing here renders: these are data and pure rewrites of it, so a new probe is one entry here.
"""

from __future__ import annotations

import copy
import json
from typing import Any

#: The tools the probes' conversations declare and call.
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search_docs", "description": "Search the documentation.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
]


def reasoning_fields(text: str) -> dict[str, str]:
    """The same reasoning under every field name templates read (each template renders one)."""
    return {"reasoning_content": text, "thinking": text, "reasoning": text}


def function_call(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Tool call ``i`` of the probes: function ``name`` with ``args`` (id ``call_i``)."""
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


#: name -> (messages, tools). Contents are plain prose with the whitespace real data has.
PROBES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = {
    "two-turns": ([
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "The capital of France is Paris."},
        {"role": "user", "content": "And of Italy?"},
        {"role": "assistant", "content": "Rome is the capital of Italy."},
    ], None),
    "system-reasoning": ([
        {"role": "system", "content": "You are a concise assistant.\nAnswer in one sentence."},
        {"role": "user", "content": "Explain recursion briefly."},
        {"role": "assistant", "content": "Recursion is a function calling itself on a smaller input.",
         **reasoning_fields("The user wants a short definition.\nOne sentence is enough.")},
        {"role": "user", "content": "Give an example."},
        {"role": "assistant", "content": "Computing a factorial: n! = n * (n-1)!.",
         **reasoning_fields("A factorial is the classic example.")},
    ], None),
    "tool-call": ([
        {"role": "system", "content": "You can look up the weather."},
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [function_call(1, "get_weather", {"city": "Oslo"})]},
        {"role": "tool", "content": "{\"temperature\": 4, \"sky\": \"cloudy\"}", "name": "get_weather",
         "tool_call_id": "call_1"},
        {"role": "assistant", "content": "It is 4 degrees and cloudy in Oslo.",
         **reasoning_fields("The tool answered; summarise it.")},
    ], TOOLS),
    "two-tool-calls": ([
        {"role": "user", "content": "Compare the weather in Rome and Paris, and find the docs on units."},
        {"role": "assistant", "content": "",
         "tool_calls": [function_call(1, "get_weather", {"city": "Rome", "unit": "celsius"}),
                        function_call(2, "search_docs", {"query": "temperature units"})]},
        {"role": "tool", "content": "Rome: 18 C, sunny", "name": "get_weather", "tool_call_id": "call_1"},
        {"role": "tool", "content": "Units: celsius or fahrenheit.", "name": "search_docs", "tool_call_id": "call_2"},
        {"role": "assistant", "content": "Rome is sunny at 18 C; the docs list celsius and fahrenheit."},
        {"role": "user", "content": "Thanks!"},
        {"role": "assistant", "content": "You are welcome."},
    ], TOOLS),
    # an assistant message with both content and tool calls: a limit, see OPTIONAL
    "tool-call-with-content": ([
        {"role": "user", "content": "Is it raining in Bergen?"},
        {"role": "assistant", "content": "Let me check the weather first.",
         "tool_calls": [function_call(1, "get_weather", {"city": "Bergen"})]},
        {"role": "tool", "content": "Bergen: rain, 9 C", "name": "get_weather", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "Yes, it is raining in Bergen."},
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": "Any time."},
    ], TOOLS),
}
#: Probes a profile may fail and still be used, each with what failing it means for the data. Some
#: template revisions render a message that has both content and tool calls outside their own turn
#: structure (Gemma 4 before its fifth revision closes the model turn after that content, so the
#: next answer has no header): the rows of such conversations are malformed as written, and
#: turns_well_formed reports them; the profile is still right for every other row.
OPTIONAL: dict[str, str] = {
    "tool-call-with-content": "rows with an assistant message holding both content and tool calls",
}
#: Conversations that only show a relaxation is needed (``tighten``), never required to label exactly: a
#: second round of tool calls, which axolotl's DeepSeek V3 opens with a new ``<｜Assistant｜>`` inside the
#: open turn, and which TRL's DeepSeek V3 renders inside the open tool-outputs block (its defect).
EVIDENCE: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = {
    "two-tool-rounds": ([
        {"role": "user", "content": "What is the weather in Lima, and then in Quito?"},
        {"role": "assistant", "content": "", "tool_calls": [function_call(1, "get_weather", {"city": "Lima"})]},
        {"role": "tool", "content": "Lima: 22 C, clear", "name": "get_weather", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "", "tool_calls": [function_call(2, "get_weather", {"city": "Quito"})]},
        {"role": "tool", "content": "Quito: 14 C, rain", "name": "get_weather", "tool_call_id": "call_2"},
        {"role": "assistant", "content": "Lima is clear at 22 C; Quito has rain at 14 C."},
    ], TOOLS),
}
#: Template switches a probe is also rendered under, when the template reads them.
SWITCHES: tuple[dict[str, Any], ...] = ({}, {"enable_thinking": False})

#: (messages, tools) the generation prompt is rendered after: a user message, and a tool message.
PROMPT_CONTEXTS: tuple[tuple[list[dict[str, Any]], list[dict[str, Any]] | None], ...] = (
    (PROBES["two-turns"][0][:1], None),
    (PROBES["tool-call"][0][:4], PROBES["tool-call"][1]),
)

#: The derivation's sentinel contents (``derive.py``), letter-only: BPE keeps them apart from the newlines and
#: markers around them.
SYS, U1, A1, U2, A2 = "Qzsysq", "Qzusrone", "Qzastone", "Qzusrtwo", "Qzasttwo"
REASON, TOOL_OUT, FN, ARG = "Qzreason", "Qztoolout", "qz_lookup", "Qzargval"

TOOL_SCHEMA = {"type": "function", "function": {
    "name": FN, "description": "Look a word up.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
TOOL_CALL = {"id": "call_qz1", "type": "function", "function": {"name": FN, "arguments": {"q": ARG}}}


def string_args(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool-call arguments as JSON strings (some templates concatenate them as text)."""
    out = copy.deepcopy(messages)
    for m in out:
        for c in m.get("tool_calls") or ():
            c["function"]["arguments"] = json.dumps(c["function"]["arguments"])
    return out


def fixed_length_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool-call ids of exactly nine alphanumerics (Mistral v3 raises on any other id), answers rewritten alike."""
    def nine(call_id: str) -> str:
        return f"call{int(call_id.rsplit('_', 1)[-1]):05d}"

    out = copy.deepcopy(messages)
    for m in out:
        for c in m.get("tool_calls") or ():
            c["id"] = nine(c["id"])
        if m.get("tool_call_id"):
            m["tool_call_id"] = nine(m["tool_call_id"])
    return out


def content_parts(messages: list[dict]) -> list[dict]:
    """The same messages with string content as a list of text parts (``[{"type": "text", ...}]``).

    Multimodal templates (SmolVLM, Idefics3, LLaVA-NeXT) read only part lists and drop or reject
    plain strings; a probe in this form lets their turn markers be seen, and judged.
    """
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("content"), str):
            m["content"] = [{"type": "text", "text": m["content"]}]
        out.append(m)
    return out
