"""Compiling route patterns such as ``/users/<int:user_id>/posts/<slug>``."""

import ast
import re
from urllib.parse import urlencode

from .converters import DEFAULT_CONVERTERS
from .errors import BuildError, RouteError, ValidationError

_VARIABLE = re.compile(
    r"""
    <
    (?:
        (?P<converter>[a-zA-Z_][a-zA-Z0-9_]*)   # converter name
        (?:\((?P<args>[^)]*)\))?                # optional arguments
        :
    )?
    (?P<name>[a-zA-Z_][a-zA-Z0-9_]*)            # parameter name
    >
    """,
    re.VERBOSE,
)


def _literal(node):
    # bare words are strings: any(json, xml) == any("json", "xml")
    if isinstance(node, ast.Name):
        return node.id
    return ast.literal_eval(node)


def parse_converter_args(text):
    """Parses ``"1, max=10"`` into ``((1,), {"max": 10})``."""
    if not text or not text.strip():
        return (), {}
    try:
        call = ast.parse(f"f({text})", mode="eval").body
        args = tuple(_literal(arg) for arg in call.args)
        kwargs = {kw.arg: _literal(kw.value) for kw in call.keywords}
    except (SyntaxError, ValueError) as exc:
        raise RouteError(f"invalid converter arguments: {text!r}") from exc
    return args, kwargs


def parse_pattern(pattern):
    """Splits a pattern into ``("static", text)`` and
    ``("var", converter, args, name)`` parts."""
    parts = []
    pos = 0
    for m in _VARIABLE.finditer(pattern):
        if m.start() > pos:
            parts.append(("static", pattern[pos:m.start()]))
        parts.append(("var", m.group("converter") or "default", m.group("args"), m.group("name")))
        pos = m.end()
    if pos < len(pattern):
        parts.append(("static", pattern[pos:]))
    for part in parts:
        if part[0] == "static" and ("<" in part[1] or ">" in part[1]):
            raise RouteError(f"malformed variable in pattern {pattern!r}")
    return parts


class RoutePattern:
    """A compiled route pattern."""

    def __init__(self, pattern, converters=None):
        if not pattern.startswith("/"):
            raise RouteError(f"pattern must start with '/': {pattern!r}")
        available = dict(DEFAULT_CONVERTERS)
        if converters:
            available.update(converters)

        self.pattern = pattern
        self.parts = parse_pattern(pattern)
        self.converters = {}
        regex = ["^"]
        for part in self.parts:
            if part[0] == "static":
                regex.append(re.escape(part[1]))
                continue
            _, conv_name, conv_args, name = part
            if name in self.converters:
                raise RouteError(f"duplicate parameter {name!r} in {pattern!r}")
            if conv_name not in available:
                raise RouteError(f"unknown converter {conv_name!r} in {pattern!r}")
            args, kwargs = parse_converter_args(conv_args)
            try:
                converter = available[conv_name](*args, **kwargs)
            except TypeError as exc:
                raise RouteError(f"bad arguments for {conv_name!r}: {exc}") from exc
            self.converters[name] = converter
            regex.append(f"(?P<{name}>{converter.regex})")
        regex.append("$")
        self.regex = re.compile("".join(regex))

    @property
    def names(self):
        return tuple(self.converters)

    @property
    def is_static(self):
        return not self.converters

    @property
    def has_trailing_slash(self):
        return self.pattern.endswith("/")

    def sort_key(self):
        """Static routes first, then routes with more static text and lighter
        converters, so ``/users/me`` wins over ``/users/<name>``."""
        static_len = sum(len(p[1]) for p in self.parts if p[0] == "static")
        weights = tuple(conv.weight for conv in self.converters.values())
        return (not self.is_static, sum(weights), -static_len)

    def match(self, path):
        """Returns the converted parameters if ``path`` matches, else None."""
        m = self.regex.match(path)
        if m is None:
            return None
        values = {}
        for name, converter in self.converters.items():
            try:
                values[name] = converter.to_python(m.group(name))
            except (ValidationError, ValueError):
                return None
        return values

    def build(self, values, query=None):
        """Builds the URL path for ``values``; ``query`` (a mapping) is appended
        as a query string."""
        missing = [name for name in self.converters if name not in values]
        if missing:
            raise BuildError(f"missing values for {self.pattern!r}: {', '.join(missing)}")
        out = []
        for part in self.parts:
            if part[0] == "static":
                out.append(part[1])
            else:
                name = part[3]
                try:
                    out.append(self.converters[name].to_url(values[name]))
                except (ValidationError, ValueError) as exc:
                    raise BuildError(f"cannot build {name!r} for {self.pattern!r}: {exc}") from exc
        url = "".join(out)
        if query:
            url += "?" + urlencode(query, doseq=True)
        return url

    def __repr__(self):
        return f"RoutePattern({self.pattern!r})"
