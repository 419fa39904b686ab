"""Exception hierarchy shared by the parser, the interpolator and the loader."""


class ConfigError(Exception):
    """Base class of every error raised by iniconf."""


class ParseError(ConfigError):
    """The text is not valid INI syntax."""

    def __init__(self, message, source="<string>", lineno=None):
        self.source = source
        self.lineno = lineno
        where = source if lineno is None else f"{source}:{lineno}"
        super().__init__(f"{where}: {message}")


class DuplicateKeyError(ParseError):
    """A key appears twice in the same section of one file."""


class NoSectionError(ConfigError, KeyError):
    def __init__(self, section):
        self.section = section
        super().__init__(f"no section {section!r}")

    def __str__(self):
        return self.args[0]


class NoOptionError(ConfigError, KeyError):
    def __init__(self, section, key):
        self.section = section
        self.key = key
        super().__init__(f"no option {key!r} in section {section!r}")

    def __str__(self):
        return self.args[0]


class InterpolationError(ConfigError):
    """A ${...} reference could not be expanded."""


class MissingReferenceError(InterpolationError):
    def __init__(self, section, key, reference):
        self.section = section
        self.key = key
        self.reference = reference
        super().__init__(
            f"[{section}] {key}: reference ${{{reference}}} points to a missing option"
        )


class InterpolationDepthError(InterpolationError):
    def __init__(self, section, key, chain):
        self.section = section
        self.key = key
        self.chain = list(chain)
        path = " -> ".join(f"{s}:{k}" for s, k in self.chain)
        super().__init__(f"[{section}] {key}: interpolation too deep or circular ({path})")
