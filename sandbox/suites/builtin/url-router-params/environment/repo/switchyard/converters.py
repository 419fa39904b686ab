"""Path parameter converters.

A converter owns the regular expression a parameter must match, turns the
matched text into a Python value (``to_python``) and turns a value back into
URL text (``to_url``).
"""

import re
import uuid
from urllib.parse import quote

from .errors import RouteError, ValidationError


class Converter:
    #: regular expression for one parameter (no capturing groups)
    regex = r"[^/]+"
    #: routes are tried in order of their specificity; lower weights win
    weight = 100

    def to_python(self, value):
        return value

    def to_url(self, value):
        return quote(str(value), safe="")


class StringConverter(Converter):
    """``<name>`` / ``<string(minlength=2, maxlength=8):name>``: one segment."""

    def __init__(self, minlength=1, maxlength=None, length=None):
        if length is not None:
            self.regex = rf"[^/]{{{int(length)}}}"
        else:
            upper = "" if maxlength is None else str(int(maxlength))
            self.regex = rf"[^/]{{{int(minlength)},{upper}}}"


class IntConverter(Converter):
    """``<int:name>``: non-negative integer, optionally bounded."""

    regex = r"[0-9]+"
    weight = 50

    def __init__(self, min=None, max=None):
        self.min = min
        self.max = max

    def to_python(self, value):
        number = int(value)
        if self.min is not None and number < self.min:
            raise ValidationError(f"{number} < {self.min}")
        if self.max is not None and number > self.max:
            raise ValidationError(f"{number} > {self.max}")
        return number

    def to_url(self, value):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValidationError(f"not a non-negative int: {value!r}")
        return str(value)


class FloatConverter(Converter):
    """``<float:name>``: decimal number with a fractional part, e.g. ``1.5``."""

    regex = r"[0-9]+\.[0-9]+"
    weight = 50

    def to_python(self, value):
        return float(value)

    def to_url(self, value):
        return repr(float(value))


class UUIDConverter(Converter):
    """``<uuid:name>``: canonical UUID text, returned as :class:`uuid.UUID`."""

    regex = (
        r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
        r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    )
    weight = 50

    def to_python(self, value):
        return uuid.UUID(value)

    def to_url(self, value):
        return str(uuid.UUID(str(value)))


class AnyConverter(Converter):
    """``<any(json, xml):fmt>``: one of a fixed set of segments."""

    weight = 40

    def __init__(self, *items):
        if not items:
            raise RouteError("any() needs at least one item")
        self.items = [str(item) for item in items]
        self.regex = "(?:" + "|".join(re.escape(item) for item in self.items) + ")"

    def to_url(self, value):
        if str(value) not in self.items:
            raise ValidationError(f"{value!r} is not one of {self.items}")
        return quote(str(value), safe="")


class PathConverter(Converter):
    """``<path:name>``: the rest of the path, slashes included."""

    regex = r"[^/].*?"
    weight = 200


DEFAULT_CONVERTERS = {
    "default": StringConverter,
    "string": StringConverter,
    "int": IntConverter,
    "float": FloatConverter,
    "uuid": UUIDConverter,
    "any": AnyConverter,
    "path": PathConverter,
}
