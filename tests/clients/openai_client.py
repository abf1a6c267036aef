#!/usr/bin/env python3
"""The official `openai` client against a swactor server, as an application uses it:
a weather-tool round trip (call, tool result, final answer) whole and streamed through
the chat API and the Responses API, a JSON-schema answer that validates, and content
parts (text parts joined; another type refused with a 400 naming it).

    openai_client.py BASE_URL

prints one JSON object of what it saw; exits non-zero on the first check that fails.
"""
import json
import sys

import openai

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def main():
    client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0)
    model = client.models.list().data[0].id
    seen = {}

    # The call, whole.
    r = client.chat.completions.create(model=model, messages=ASK, tools=TOOLS,
                                       temperature=0, max_tokens=64)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather", call
    args = json.loads(call.function.arguments)
    assert args.get("city") == "Paris", args
    seen["call"] = {"id": call.id, "name": call.function.name, "arguments": args}

    # The same call, streamed: argument fragments add up to the same call.
    calls = {}
    finish = None
    for chunk in client.chat.completions.create(model=model, messages=ASK, tools=TOOLS,
                                                temperature=0, max_tokens=64, stream=True):
        c = chunk.choices[0]
        finish = c.finish_reason or finish
        for tc in c.delta.tool_calls or []:
            entry = calls.setdefault(tc.index, {"name": "", "arguments": ""})
            if tc.function.name:
                entry["name"] = tc.function.name
            entry["arguments"] += tc.function.arguments or ""
    assert finish == "tool_calls", finish
    assert calls[0]["name"] == "get_weather", calls
    assert json.loads(calls[0]["arguments"]) == args, calls
    seen["streamed_call"] = calls[0]

    # The tool's result goes back through the template; the model answers.
    history = ASK + [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id,
                      "content": json.dumps({"temperature_c": 18, "sky": "clear"})}]
    final = client.chat.completions.create(model=model, messages=history, tools=TOOLS,
                                           temperature=0, max_tokens=48)
    f = final.choices[0]
    assert f.finish_reason in ("stop", "length", "tool_calls"), f
    assert final.usage.prompt_tokens > r.usage.prompt_tokens, final.usage
    seen["final"] = {"finish_reason": f.finish_reason, "content": f.message.content}

    # Content parts.
    parts = client.chat.completions.create(
        model=model, temperature=0, max_tokens=8,
        messages=[{"role": "user", "content": [{"type": "text", "text": "Say "},
                                                {"type": "text", "text": "hello."}]}])
    assert isinstance(parts.choices[0].message.content, str)
    try:
        client.chat.completions.create(
            model=model, max_tokens=8,
            messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}])
        raise AssertionError("an image part was accepted")
    except openai.BadRequestError as e:
        assert "image_url" in str(e), e
        seen["image_refused"] = e.status_code
    # A forced call: "required" makes one even where the model would not; a named function
    # is the one called.
    hello = [{"role": "user", "content": "Say hello."}]
    forced = client.chat.completions.create(model=model, messages=hello, tools=TOOLS,
                                            tool_choice="required", temperature=0, max_tokens=64)
    assert forced.choices[0].finish_reason == "tool_calls", forced
    time_tool = {"type": "function", "function": {
        "name": "get_time", "parameters": {"type": "object",
                                           "properties": {"zone": {"type": "string"}},
                                           "required": ["zone"]}}}
    named = client.chat.completions.create(
        model=model, messages=ASK, tools=TOOLS + [time_tool], temperature=0, max_tokens=64,
        tool_choice={"type": "function", "function": {"name": "get_time"}})
    ncall = named.choices[0].message.tool_calls[0]
    assert ncall.function.name == "get_time" and "zone" in json.loads(ncall.function.arguments)
    seen["forced"] = {"required": forced.choices[0].message.tool_calls[0].function.name,
                      "named": ncall.function.name}

    # Structured output: a JSON schema the answer must follow.
    schema = {"type": "object",
              "properties": {"city": {"type": "string"}, "population": {"type": "integer"},
                             "landmarks": {"type": "array", "items": {"type": "string"},
                                           "maxItems": 3}},
              "required": ["city", "population", "landmarks"], "additionalProperties": False}
    out = client.chat.completions.create(
        model=model, temperature=0, max_tokens=96,
        messages=[{"role": "user", "content": "Describe Paris as JSON."}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "city", "schema": schema, "strict": True}})
    doc = json.loads(out.choices[0].message.content)
    assert set(doc) == {"city", "population", "landmarks"}, doc
    assert isinstance(doc["city"], str) and isinstance(doc["population"], int), doc
    assert all(isinstance(x, str) for x in doc["landmarks"]) and len(doc["landmarks"]) <= 3, doc
    seen["json_schema"] = doc

    # The Responses API: the same call whole and streamed, then the round trip.
    flat = [{"type": "function", **TOOLS[0]["function"]}]
    resp = client.responses.create(model=model, input=ASK[0]["content"], tools=flat,
                                   temperature=0, max_output_tokens=64)
    fc = [o for o in resp.output if o.type == "function_call"]
    assert resp.status == "completed" and fc and fc[0].name == "get_weather", resp
    assert json.loads(fc[0].arguments) == args, fc
    with client.responses.stream(model=model, input=ASK[0]["content"], tools=flat,
                                 temperature=0, max_output_tokens=64) as s:
        streamed = s.get_final_response()
    sfc = [o for o in streamed.output if o.type == "function_call"]
    assert sfc and json.loads(sfc[0].arguments) == args, streamed
    again = client.responses.create(
        model=model, tools=flat, temperature=0, max_output_tokens=48,
        input=[{"role": "user", "content": ASK[0]["content"]}, fc[0].model_dump(exclude_none=True),
               {"type": "function_call_output", "call_id": fc[0].call_id,
                "output": json.dumps({"temperature_c": 18, "sky": "clear"})}])
    assert again.status in ("completed", "incomplete"), again
    assert again.usage.input_tokens > resp.usage.input_tokens, again.usage
    seen["responses"] = {"call": json.loads(fc[0].arguments), "final": again.output_text}
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
