"""Config: the public entry point. Loads one or more files, answers typed, interpolated lookups."""

import os
from collections.abc import Mapping

from . import convert
from .errors import NoOptionError, NoSectionError
from .interpolation import Interpolator
from .parser import DEFAULT_SECTION, Document, normalize_key, parse

_MISSING = object()


class Config:
    """A set of sections read from INI text; values are interpolated when read."""

    def __init__(self, document=None, interpolate=True):
        self._doc = document if document is not None else Document()
        self._interpolate = interpolate
        self._interpolator = Interpolator(self._doc.raw_get)

    @classmethod
    def from_string(cls, text, source="<string>", **options):
        return cls(parse(text, source), **options)

    @classmethod
    def from_file(cls, path, encoding="utf-8", **options):
        return cls.from_files([path], encoding=encoding, **options)

    @classmethod
    def from_files(cls, paths, encoding="utf-8", missing_ok=False, **options):
        """Read files in order; a later file overrides keys of earlier ones."""
        doc = Document()
        for path in paths:
            if missing_ok and not os.path.exists(path):
                continue
            with open(path, encoding=encoding) as handle:
                doc.merge(parse(handle.read(), os.fspath(path)))
        return cls(doc, **options)

    # -- structure ---------------------------------------------------------------------------

    def sections(self):
        return self._doc.section_names()

    def has_section(self, section):
        return section in self._doc.sections

    def options(self, section):
        """Keys visible in a section: its own keys followed by inherited defaults."""
        own = self._section_values(section)
        return list(own) + [k for k in self._doc.defaults if k not in own]

    def has_option(self, section, key):
        if section != DEFAULT_SECTION and not self.has_section(section):
            return False
        return self._doc.raw_get(section, key) is not None

    # -- values ------------------------------------------------------------------------------

    def get(self, section, key, fallback=_MISSING, raw=False):
        """The value of key in section (or the defaults), with references expanded."""
        if section != DEFAULT_SECTION and not self.has_section(section):
            if fallback is not _MISSING:
                return fallback
            raise NoSectionError(section)
        value = self._doc.raw_get(section, key)
        if value is None:
            if fallback is not _MISSING:
                return fallback
            raise NoOptionError(section, normalize_key(key))
        if raw or not self._interpolate:
            return value
        return self._interpolator.expand(section, normalize_key(key), value)

    def get_as(self, kind, section, key, fallback=_MISSING):
        value = self.get(section, key, fallback=_MISSING if fallback is _MISSING else None)
        if value is None:
            return fallback
        return convert.CONVERTERS[kind](value)

    def getint(self, section, key, fallback=_MISSING):
        return self.get_as("int", section, key, fallback)

    def getfloat(self, section, key, fallback=_MISSING):
        return self.get_as("float", section, key, fallback)

    def getbool(self, section, key, fallback=_MISSING):
        return self.get_as("bool", section, key, fallback)

    def getlist(self, section, key, fallback=_MISSING):
        return self.get_as("list", section, key, fallback)

    def getduration(self, section, key, fallback=_MISSING):
        return self.get_as("duration", section, key, fallback)

    def getsize(self, section, key, fallback=_MISSING):
        return self.get_as("size", section, key, fallback)

    def set(self, section, key, value):
        """Set a raw value (references in it are expanded when read)."""
        if section == DEFAULT_SECTION:
            self._doc.defaults[normalize_key(key)] = str(value)
            return
        if not self.has_section(section):
            raise NoSectionError(section)
        self._doc.sections[section][normalize_key(key)] = str(value)

    def add_section(self, section):
        self._doc.sections.setdefault(section, {})

    def section(self, name):
        if name != DEFAULT_SECTION and not self.has_section(name):
            raise NoSectionError(name)
        return SectionView(self, name)

    def as_dict(self, raw=False):
        """{section: {key: value}} for every section, defaults included in each."""
        return {name: {k: self.get(name, k, raw=raw) for k in self.options(name)}
                for name in self.sections()}

    def _section_values(self, section):
        if section == DEFAULT_SECTION:
            return self._doc.defaults
        return self._doc.sections.get(section, {})


class SectionView(Mapping):
    """Read-only mapping over one section's interpolated values."""

    def __init__(self, config, name):
        self._config = config
        self.name = name

    def __getitem__(self, key):
        try:
            return self._config.get(self.name, key)
        except NoOptionError:
            raise KeyError(key) from None

    def __iter__(self):
        return iter(self._config.options(self.name))

    def __len__(self):
        return len(self._config.options(self.name))

    def __repr__(self):
        return f"<SectionView [{self.name}]>"
