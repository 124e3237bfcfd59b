"""Render chat templates as Hugging Face transformers' apply_chat_template
(tokenize=False) does, with Debian's python3-jinja2: the same environment
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols),
tojson, raise_exception and strftime_now, and the same variables (messages,
tools, documents, add_generation_prompt and the special tokens map), and a
conversation's "kwargs" (chat_template_kwargs) when it has them.

Reads {"template", "config", "conversations"} as JSON on stdin; writes one
{"rendering"} or {"error"} per conversation and generation-prompt flag.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def token(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


def main():
    req = json.load(sys.stdin)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    tmpl = env.from_string(req["template"])
    cfg = req["config"]
    # transformers' special_tokens_map: the attributes that are set.
    special = {}
    for k in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        v = token(cfg.get(k))
        if v:
            special[k] = v
    if cfg.get("additional_special_tokens"):
        special["additional_special_tokens"] = [token(t) for t in cfg["additional_special_tokens"]]
    out = []
    for conv in req["conversations"]:
        for gen in (False, True):
            try:
                text = tmpl.render(messages=conv["messages"], tools=None, documents=None,
                                   add_generation_prompt=gen, **special, **conv.get("kwargs", {}))
                out.append({"name": conv["name"], "add_generation_prompt": gen, "rendering": text})
            except Exception as e:  # TypeError, ZeroDivisionError... raise from render too
                out.append({"name": conv["name"], "add_generation_prompt": gen, "error": str(e)})
    json.dump({"jinja2": jinja2.__version__, "results": out}, sys.stdout, ensure_ascii=False)


main()
