"""switchyard - a tiny URL router."""

from .converters import (
    AnyConverter,
    Converter,
    FloatConverter,
    IntConverter,
    PathConverter,
    StringConverter,
    UUIDConverter,
)
from .errors import (
    BuildError,
    MethodNotAllowed,
    NotFound,
    RequestRedirect,
    RouteError,
    RoutingError,
    ValidationError,
)
from .pattern import RoutePattern
from .router import Match, Route, Router

__version__ = "0.6.2"

__all__ = [
    "AnyConverter",
    "BuildError",
    "Converter",
    "FloatConverter",
    "IntConverter",
    "Match",
    "MethodNotAllowed",
    "NotFound",
    "PathConverter",
    "RequestRedirect",
    "Route",
    "RoutePattern",
    "Router",
    "RouteError",
    "RoutingError",
    "StringConverter",
    "UUIDConverter",
    "ValidationError",
]
