"""A small interpreter for the subset of Go templates (with Helm's functions) karpy's chart uses.

helm is not always at hand (not on CI, not on the machines this project is built on), yet the chart
must be checked: its templates are rendered here, compared with the kustomize base and validated
against the Kubernetes schemas. Supported: text with ``{{ }}`` actions and ``{{-`` / ``-}}``
whitespace trimming; comments; ``if`` / ``else if`` / ``else``, ``with`` / ``else``, ``define``;
pipelines with ``|``, parentheses, string / number / boolean literals, fields (``.Values.a.b``,
``.``, ``$``); the functions ``include``, ``toYaml``, ``nindent``, ``indent``, ``quote``,
``default``, ``required``, ``eq``, ``ne``, ``not``, ``and``, ``or``, ``printf`` (``%s %v %d``),
``contains``, ``trunc``, ``trimSuffix``, ``join``, ``toString``. Anything else raises
:class:`TemplateError` naming the template and the construct, so a template that strays from the
subset fails loudly instead of rendering something helm would not.

Values follow Helm's printing rules: ``nil`` prints as nothing, booleans as ``true`` / ``false``,
whole floats without a fraction; reading a field of a missing map is an error, as in helm. A
caller may rely on :func:`render` being deterministic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml


class TemplateError(Exception):
    """A template outside the supported subset, or a failing ``required``."""


# ------------------------------------------------------------------------------------------ lexing

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+(?:\.\d+)?)|(?P<field>\$?(?:\.[A-Za-z_]\w*)+|\.|\$)'
                    r"|(?P<ident>[A-Za-z_]\w*)|(?P<punct>[|()]))")


@dataclass
class _Text:
    text: str


@dataclass
class _Action:
    pipeline: list[Any]


@dataclass
class _Branch:
    kind: str  # "if" or "with"
    arms: list[tuple[list[Any] | None, list[Any]]] = field(default_factory=list)


def _tokens(src: str, where: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    src = src.rstrip()
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if m is None or m.end() == pos:
            raise TemplateError(f"{where}: cannot read {src[pos:]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _parse_pipeline(tokens: list[tuple[str, str]], where: str) -> list[Any]:
    """A pipeline: a list of commands; a command is a list of operands; an operand is a token or a
    parenthesised pipeline."""
    pos = 0

    def pipeline(stop: str | None) -> list[Any]:
        nonlocal pos
        commands: list[list[Any]] = [[]]
        while pos < len(tokens):
            kind, text = tokens[pos]
            if kind == "punct" and text == ")":
                if stop != ")":
                    raise TemplateError(f"{where}: unbalanced ')'")
                pos += 1
                return commands
            pos += 1
            if kind == "punct" and text == "|":
                commands.append([])
            elif kind == "punct" and text == "(":
                commands[-1].append(("pipe", pipeline(")")))
            else:
                commands[-1].append((kind, text))
        if stop is not None:
            raise TemplateError(f"{where}: missing ')'")
        return commands

    out = pipeline(None)
    if any(not c for c in out):
        raise TemplateError(f"{where}: empty command in pipeline")
    return out


def parse(text: str, where: str) -> tuple[list[Any], dict[str, list[Any]]]:
    """The node tree of a template and the templates it defines."""
    defines: dict[str, list[Any]] = {}
    root: list[Any] = []
    stack: list[tuple[str, Any, list[Any]]] = [("root", None, root)]
    pos = 0
    trim_next = False
    for m in _ACTION.finditer(text):
        chunk = text[pos:m.start()]
        if trim_next:
            chunk = chunk.lstrip()
        if m.group(1):
            chunk = chunk.rstrip()
        if chunk:
            stack[-1][2].append(_Text(chunk))
        pos = m.end()
        trim_next = bool(m.group(3))
        body = m.group(2).strip()
        if body.startswith("/*"):
            if not body.endswith("*/"):
                raise TemplateError(f"{where}: unterminated comment")
            continue
        word = body.split(None, 1)[0] if body else ""
        rest = body[len(word):].strip()
        if word in ("if", "with"):
            branch = _Branch(word)
            branch.arms.append((_parse_pipeline(_tokens(rest, where), where), []))
            stack[-1][2].append(branch)
            stack.append((word, branch, branch.arms[-1][1]))
        elif word == "else":
            kind, branch, _ = stack[-1]
            if kind not in ("if", "with"):
                raise TemplateError(f"{where}: else outside if/with")
            if rest.startswith("if "):
                if kind != "if":
                    raise TemplateError(f"{where}: else if inside with")
                branch.arms.append((_parse_pipeline(_tokens(rest[3:], where), where), []))
            elif rest:
                raise TemplateError(f"{where}: unsupported else clause {rest!r}")
            else:
                branch.arms.append((None, []))
            stack[-1] = (kind, branch, branch.arms[-1][1])
        elif word == "define":
            name = json.loads(rest)
            body_nodes: list[Any] = []
            defines[name] = body_nodes
            stack.append(("define", name, body_nodes))
        elif word == "end":
            if len(stack) == 1:
                raise TemplateError(f"{where}: end without a block")
            stack.pop()
        elif word in ("range", "block", "template", "break", "continue") or (body.startswith("$") and ":=" in body):
            raise TemplateError(f"{where}: {word or body!r} is outside the supported subset")
        else:
            stack[-1][2].append(_Action(_parse_pipeline(_tokens(body, where), where)))
    tail = text[pos:]
    if trim_next:
        tail = tail.lstrip()
    if tail:
        stack[-1][2].append(_Text(tail))
    if len(stack) != 1:
        raise TemplateError(f"{where}: {stack[-1][0]} without end")
    return root, defines


# --------------------------------------------------------------------------------------- evaluation


def truthy(value: Any) -> bool:
    """Go template truth: false, 0, nil and empty strings, lists and maps are false."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0
    if isinstance(value, str | list | tuple | dict):
        return len(value) > 0
    return True


def to_text(value: Any) -> str:
    """How Helm prints a value into a template."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        raise TemplateError(f"printing a {type(value).__name__} directly (use toYaml): {value!r}")
    return str(value)


def to_yaml(value: Any) -> str:
    """Helm's ``toYaml``: keys sorted, block style, no trailing newline."""
    if value is None:
        return "null"
    return yaml.safe_dump(value, sort_keys=True, default_flow_style=False, width=10_000).rstrip("\n")


def _indent(n: Any, text: Any) -> str:
    pad = " " * int(n)
    return "\n".join(pad + line for line in to_text(text).split("\n"))


def _printf(fmt: str, *args: Any) -> str:
    values = iter(args)

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "%%":
            return "%"
        try:
            return to_text(next(values))
        except StopIteration:
            raise TemplateError(f"printf {fmt!r}: too few arguments") from None

    return re.sub(r"%[svd%]", sub, fmt)


def _required(message: str, value: Any) -> Any:
    if value is None or value == "":
        raise TemplateError(message)
    return value


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "toYaml": to_yaml,
    "nindent": lambda n, text: "\n" + _indent(n, text),
    "indent": _indent,
    "quote": lambda *vs: " ".join(json.dumps(to_text(v)) for v in vs if v is not None),
    "default": lambda default, *v: v[0] if v and truthy(v[0]) else default,
    "required": _required,
    "eq": lambda a, *bs: any(a == b for b in bs),
    "ne": lambda a, b: a != b,
    "not": lambda v: not truthy(v),
    "and": lambda *vs: next((v for v in vs if not truthy(v)), vs[-1]),
    "or": lambda *vs: next((v for v in vs if truthy(v)), vs[-1]),
    "printf": _printf,
    "contains": lambda sub, s: to_text(sub) in to_text(s),
    "trunc": lambda n, s: to_text(s)[: int(n)],
    "trimSuffix": lambda suffix, s: to_text(s)[: -len(suffix)] if suffix and to_text(s).endswith(suffix)
    else to_text(s),
    "join": lambda sep, items: to_text(sep).join(to_text(i) for i in items or ()),
    "toString": to_text,
}


class Renderer:
    """Renders templates that share the defines of every template given to it."""

    def __init__(self, templates: Mapping[str, str]) -> None:
        self.trees: dict[str, list[Any]] = {}
        self.defines: dict[str, list[Any]] = {}
        for name, text in templates.items():
            tree, defines = parse(text, name)
            self.trees[name] = tree
            self.defines.update(defines)
        self._root: Any = None

    def render(self, name: str, root: Mapping[str, Any]) -> str:
        """Template ``name`` with ``root`` as ``.`` and ``$`` (``{"Values": ..., "Release": ...}``)."""
        self._root = root
        return self._nodes(self.trees[name], root, name)

    def _nodes(self, nodes: Sequence[Any], dot: Any, where: str) -> str:
        out: list[str] = []
        for node in nodes:
            if isinstance(node, _Text):
                out.append(node.text)
            elif isinstance(node, _Action):
                out.append(to_text(self._pipeline(node.pipeline, dot, where)))
            else:
                for cond, body in node.arms:
                    if cond is None:
                        out.append(self._nodes(body, dot, where))
                        break
                    value = self._pipeline(cond, dot, where)
                    if truthy(value):
                        out.append(self._nodes(body, value if node.kind == "with" else dot, where))
                        break
        return "".join(out)

    def _pipeline(self, commands: list[list[Any]], dot: Any, where: str) -> Any:
        result: Any = None
        for i, command in enumerate(commands):
            extra = [result] if i > 0 else []
            result = self._command(command, dot, where, extra)
        return result

    def _command(self, command: list[Any], dot: Any, where: str, extra: list[Any]) -> Any:
        kind, text = command[0]
        if kind == "ident" and text not in ("true", "false", "nil"):
            args = [self._operand(op, dot, where) for op in command[1:]] + extra
            if text == "include":
                if len(args) != 2:
                    raise TemplateError(f"{where}: include takes a name and a value")
                return self._include(str(args[0]), args[1], where)
            fn = FUNCTIONS.get(text)
            if fn is None:
                raise TemplateError(f"{where}: function {text!r} is outside the supported subset")
            try:
                return fn(*args)
            except TemplateError:
                raise
            except (TypeError, ValueError) as exc:
                raise TemplateError(f"{where}: {text}: {exc}") from None
        if len(command) > 1 or extra:
            raise TemplateError(f"{where}: {text!r} is not a function")
        return self._operand(command[0], dot, where)

    def _include(self, name: str, value: Any, where: str) -> str:
        body = self.defines.get(name)
        if body is None:
            raise TemplateError(f"{where}: no template {name!r} is defined")
        return self._nodes(body, value, name)

    def _operand(self, op: tuple[str, Any], dot: Any, where: str) -> Any:
        kind, text = op
        if kind == "pipe":
            return self._pipeline(text, dot, where)
        if kind == "str":
            return json.loads(text)
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind == "ident":
            return {"true": True, "false": False, "nil": None}[text]
        if kind == "field":
            base = self._root if text.startswith("$") else dot
            parts = [p for p in text.lstrip("$").split(".") if p]
            for i, part in enumerate(parts):
                if base is None and i > 0:  # as Go: a field of a missing map is an error, not nil
                    raise TemplateError(f"{where}: nil pointer evaluating {text} (no {'.'.join(parts[:i])})")
                base = base.get(part) if isinstance(base, Mapping) else None
            return base
        raise TemplateError(f"{where}: cannot evaluate {text!r}")
