"""Render chat templates as Hugging Face transformers' apply_chat_template
(tokenize=False) does, with Debian's python3-jinja2: the same environment
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols),
tojson, raise_exception and strftime_now, and the same variables (messages,
tools, documents, add_generation_prompt and the special tokens map), and a
conversation's "kwargs" (chat_template_kwargs) when it has them.

A conversation's messages and "tools" are OpenAI's request JSON; they reach
the template as vLLM's server hands them to apply_chat_template: each tool
its pydantic model_dump (vllm/entrypoints/openai/protocol.py,
ChatCompletionToolsParam, FunctionDefinition), each message rebuilt as
vllm/entrypoints/chat_utils.py does (_parse_chat_message_content), a tool
call's arguments parsed from JSON text (_postprocess_messages).

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


def vllm_tool(t):
    fn = dict(t["function"])
    dump = {"name": fn.pop("name"), "description": fn.pop("description", None), "parameters": fn.pop("parameters", None)}
    dump.update(fn)  # extra fields (strict...) after the declared ones
    rest = {k: v for k, v in t.items() if k not in ("type", "function")}
    return {"type": t.get("type", "function"), "function": dump, **rest}


def vllm_tools(tools):
    return [vllm_tool(t) for t in tools] if tools else None


def vllm_message(m):
    out = {"role": m["role"], "content": m.get("content") or ""}
    if m.get("name"):
        out["name"] = m["name"]
    if m.get("tool_calls"):
        calls = []
        for c in m["tool_calls"]:
            args = c["function"].get("arguments")
            calls.append({"id": c.get("id", ""), "type": c.get("type", "function"), "function": {
                "name": c["function"]["name"], "arguments": json.loads(args) if args else {}}})
        out["tool_calls"] = calls
    if m.get("tool_call_id"):
        out["tool_call_id"] = m["tool_call_id"]
    if m.get("reasoning_content"):
        out["reasoning_content"] = m["reasoning_content"]
    return out


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
                msgs = [vllm_message(m) for m in conv["messages"]]
                text = tmpl.render(messages=msgs, tools=vllm_tools(conv.get("tools")), documents=None,
                                   add_generation_prompt=gen, **special, **conv.get("kwargs", {}))
                out.append({"name": conv["name"], "add_generation_prompt": gen, "rendering": text})
            except Exception as e:  # TypeError, ZeroDivisionError... raise from render too
                out.append({"name": conv["name"], "add_generation_prompt": gen, "error": str(e)})
    json.dump({"jinja2": jinja2.__version__, "results": out}, sys.stdout, ensure_ascii=False)


main()
