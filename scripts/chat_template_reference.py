#!/usr/bin/env python3
"""Renders chat templates the way Hugging Face `transformers` does (its
`apply_chat_template`: a sandboxed jinja2 environment with trim_blocks and lstrip_blocks,
loop controls, `tojson` as json.dumps without ASCII escapes, `raise_exception` and
`strftime_now`), over the cases in a JSON file, as the reference swactor's renderer is
compared with.

    chat_template_reference.py CASES.json TEMPLATE.jinja...

prints one JSON object: {template file name: [{"case": name, "text": rendered} or
{"case": name, "error": message}, ...]}. Needs the `jinja2` package.
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def environment(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    cases = json.load(open(sys.argv[1], encoding="utf-8"))
    env = environment(datetime.datetime.fromisoformat(cases["now"]))
    out = {}
    for path in sys.argv[2:]:
        rows = []
        try:
            template = env.from_string(open(path, encoding="utf-8").read())
        except Exception as e:  # a template jinja2 itself cannot compile
            out[os.path.basename(path)] = [{"case": "*", "error": f"compile: {e}"}]
            continue
        for case in cases["cases"]:
            ctx = {
                "messages": case["messages"],
                "add_generation_prompt": case.get("add_generation_prompt", True),
                "bos_token": cases["bos_token"],
                "eos_token": cases["eos_token"],
            }
            if case.get("tools"):
                ctx["tools"] = cases["tools"]
            ctx.update(case.get("kwargs", {}))
            try:
                rows.append({"case": case["name"], "text": template.render(**ctx)})
            except Exception as e:
                rows.append({"case": case["name"], "error": f"{type(e).__name__}: {e}"})
        out[os.path.basename(path)] = rows
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
