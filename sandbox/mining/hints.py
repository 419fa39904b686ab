"""The buyer's `--env-hint` file: what leafcost cannot read from a repository (its Python or Node, a base image, system
packages, the install and test commands, plain environment variables), in YAML or TOML."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sandbox.image_names import is_reference
from sandbox.mining.errors import MiningError

# Names that look like credentials: a hint file is written into images and rows, never a secret's place.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")


class EnvHint(BaseModel):
    """What the buyer says about the repository's environment; every field optional, each one overriding what
    leafcost detects."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = Field(None, pattern=r"^3\.\d{1,2}$", description="CPython minor, e.g. '3.11'")
    node: str | None = Field(None, pattern=r"^\d{1,2}$", description="Node major, e.g. '20' (a Node project)")
    base_image: str | None = None  # the env image's FROM; default docker.io/library/python:<python>-slim-bookworm
    system_packages: list[str] = Field(default_factory=list)  # Debian package names, installed with apt when missing
    install: list[str] | None = None  # shell commands run in /testbed, replacing every detected install step
    test_command: str | None = None  # e.g. "pytest -rA": the touched test files are appended
    env: dict[str, str] = Field(default_factory=dict)  # plain variables for the install and the tests

    @field_validator("base_image")
    @classmethod
    def _an_image(cls, value: str | None) -> str | None:
        if value is not None and not is_reference(value):
            raise ValueError(f"{value[:200]!r} is not an image reference ([registry/]name[:tag])")
        return value

    @field_validator("system_packages")
    @classmethod
    def _debian_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _DEBIAN_PACKAGE.fullmatch(name):
                raise ValueError(f"{name[:100]!r} is not a Debian package name")
        return value

    @field_validator("install")
    @classmethod
    def _one_line_each(cls, value: list[str] | None) -> list[str] | None:
        for command in value or []:
            if not command.strip() or "\n" in command or "\r" in command:
                raise ValueError("each install command is one non-empty line (give several commands as list items)")
        return value

    @field_validator("test_command")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "\n" in value or "\r" in value):
            raise ValueError("the test command is one non-empty line")
        return value

    @field_validator("env")
    @classmethod
    def _plain_variables(cls, value: dict[str, str]) -> dict[str, str]:
        for name, setting in value.items():
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name[:100]!r} is not an environment variable name")
            if _SECRET_NAME.search(name):
                raise ValueError(f"{name} looks like a secret; a hint file ends up in images and task rows, so it "
                                 "takes plain settings only (remove it; a test needing a credential cannot be mined)")
            if "\n" in setting or "\0" in setting:
                raise ValueError(f"{name}'s value is one line")
        return value


def load_env_hint(path: Path) -> EnvHint:
    """The hint file at `path` (.yaml/.yml or .toml); MiningError names the file and what is wrong with it."""
    path = Path(path)
    data = _read(path)
    if not isinstance(data, dict):
        raise MiningError(f"hint file {path}: expected a mapping of settings at the top level")
    unknown = sorted(str(key) for key in data if key not in EnvHint.model_fields)
    if unknown:
        known = ", ".join(EnvHint.model_fields)
        raise MiningError(f"hint file {path}: unknown key(s) {', '.join(unknown)} (known: {known})")
    try:
        return EnvHint.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        message = first["msg"].removeprefix("Value error, ")
        raise MiningError(f"hint file {path}: {where}: {message}") from None


def _read(path: Path) -> object:
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml"):
        raise MiningError(f"hint file {path}: unknown format {suffix or '(no extension)'}; name it .yaml, .yml or "
                          ".toml")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MiningError(f"hint file {path}: cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise MiningError(f"hint file {path}: not UTF-8 text") from None
    try:
        return tomllib.loads(text) if suffix == ".toml" else (yaml.safe_load(text) or {})
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MiningError(f"hint file {path}: not valid {suffix[1:].upper()}: {said}") from None
