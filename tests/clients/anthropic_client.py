#!/usr/bin/env python3
"""The official `anthropic` client against a swactor server's Messages API: a weather
tool round trip (tool_use, tool_result, final answer) whole and streamed, and `system`.
It sends no temperature (this client no longer takes one): the server samples greedily
unless started with other `--sampling` flags.

    anthropic_client.py BASE_URL

prints one JSON object of what it saw; exits non-zero on the first check that fails.
"""
import json
import sys

import anthropic

TOOLS = [{
    "name": "get_weather",
    "description": "The current weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]},
}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def main():
    client = anthropic.Anthropic(base_url=sys.argv[1], api_key="unused", max_retries=0)
    seen = {}
    m = client.messages.create(model="served", max_tokens=64, messages=ASK, tools=TOOLS)
    assert m.stop_reason == "tool_use", m
    use = next(b for b in m.content if b.type == "tool_use")
    assert use.name == "get_weather" and use.input.get("city") == "Paris", use
    seen["tool_use"] = {"id": use.id, "name": use.name, "input": use.input}

    with client.messages.stream(model="served", max_tokens=64, messages=ASK, tools=TOOLS) as s:
        streamed = s.get_final_message()
    suse = next(b for b in streamed.content if b.type == "tool_use")
    assert streamed.stop_reason == "tool_use" and suse.input == use.input, streamed
    seen["streamed_tool_use"] = suse.input

    history = ASK + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                      "content": json.dumps({"temperature_c": 18})}]},
    ]
    final = client.messages.create(model="served", max_tokens=48, messages=history,
                                   tools=TOOLS, system="Answer in one sentence.")
    assert final.stop_reason in ("end_turn", "max_tokens", "tool_use"), final
    assert final.usage.input_tokens > m.usage.input_tokens, final.usage
    seen["final"] = {"stop_reason": final.stop_reason,
                     "text": "".join(b.text for b in final.content if b.type == "text")}

    with client.messages.stream(model="served", max_tokens=8,
                                messages=[{"role": "user", "content": "Say hello."}]) as s:
        text = "".join(s.text_stream)
    assert isinstance(text, str)
    seen["streamed_text"] = text
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
