"""Image references as Docker reads them: whether a string is one, and the full name a short one stands for.
Pure rules, shared by task loading (Compose services) and the container backend; no engine is touched."""

from __future__ import annotations

import re

# The image reference grammar of distribution/reference (what Docker and Podman parse): [domain/]path[:tag][@digest].
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = (r"(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*"
           r"[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?")
_IMAGE_ID = re.compile(r"(?:sha256:)?[0-9a-f]{64}")
_REFERENCE = re.compile(rf"(?P<name>(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*)(?::[\w][\w.-]{{0,127}})?"
                        r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")


def qualified(reference: str) -> str:
    """`reference` as Docker reads it: a first component with a `.` or `:`, or `localhost`, or any uppercase letter
    is a registry host; otherwise the image is on Docker Hub (`docker.io`), where a one-component name is in
    `library/` (`python:3.13-slim` is `docker.io/library/python:3.13-slim`, `user/app` is `docker.io/user/app`).
    Podman instead asks an unqualified-search registry, which machines without one refuse. An image ID (64 hex
    digits, with or without `sha256:`) is no name and stays as it is."""
    if _IMAGE_ID.fullmatch(reference):
        return reference
    domain, path = _domain(reference)
    domain = "docker.io" if domain in (None, "index.docker.io") else domain
    if domain == "docker.io" and "/" not in path.partition("@")[0]:  # a tag or a digest never holds a `/`
        path = f"library/{path}"
    return f"{domain}/{path}"


def local_names(reference: str) -> list[str]:
    """Where an image named `reference` may already be on this machine, in the order looked: Docker's name first,
    then, for a short name, `localhost/NAME`, which is where Podman keeps an image tagged or imported as NAME."""
    short = _domain(reference)[0] is None and not _IMAGE_ID.fullmatch(reference)
    return [qualified(reference), *([f"localhost/{reference}"] if short else [])]


def is_reference(reference: str) -> bool:
    """Whether `reference` parses as an image reference (so it can never be read as an option: none starts with
    `-`)."""
    found = _REFERENCE.fullmatch(reference)
    return found is not None and len(found.group("name")) <= 255


def _domain(reference: str) -> tuple[str | None, str]:
    """The registry host a reference names (None for none) and the rest."""
    host, slash, rest = reference.partition("/")
    if slash and (host == "localhost" or any(c in host for c in ".:") or host != host.lower()):
        return host, rest
    return None, reference
