"""iniconf: a small INI-style configuration library with ${section:key} interpolation."""

from .errors import (
    ConfigError,
    DuplicateKeyError,
    InterpolationDepthError,
    InterpolationError,
    MissingReferenceError,
    NoOptionError,
    NoSectionError,
    ParseError,
)
from .loader import Config
from .parser import Document, parse

__all__ = [
    "Config",
    "ConfigError",
    "Document",
    "DuplicateKeyError",
    "InterpolationDepthError",
    "InterpolationError",
    "MissingReferenceError",
    "NoOptionError",
    "NoSectionError",
    "ParseError",
    "parse",
]

__version__ = "0.4.1"
