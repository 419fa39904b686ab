"""HTML escaping and URL clean-up shared by the block and inline renderers."""

import re
from urllib.parse import quote

_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_BARE_AMP = re.compile(r"&(?!#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{1,31};)")
_BACKSLASH_ESCAPE = re.compile(r"\\([!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]{1,31}):")

UNSAFE_SCHEMES = {"javascript", "vbscript", "file", "data"}
SAFE_DATA_IMAGES = ("data:image/png", "data:image/gif", "data:image/jpeg", "data:image/webp")


def escape_html(text: str) -> str:
    """Escape text for an HTML text node; everything is escaped, entities included."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def escape_text(text: str) -> str:
    """Escape Markdown prose: like :func:`escape_html`, but entity references
    the author wrote on purpose (``&copy;``, ``&#8212;``) are kept."""
    text = _BARE_AMP.sub("&amp;", text)
    return text.replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def escape_attr(value: str) -> str:
    """Escape an attribute value (always written in double quotes)."""
    return escape_text(value).replace("'", "&#39;")


def unescape_backslashes(text: str) -> str:
    """Drop the backslash in front of escaped ASCII punctuation."""
    return _BACKSLASH_ESCAPE.sub(r"\1", text)


def normalize_url(url: str, *, image: bool = False) -> str:
    """Prepare a link or image destination for an ``href``/``src`` attribute.

    Backslash escapes are resolved, unsafe characters percent-encoded
    (existing ``%XX`` sequences are kept), and URLs with a dangerous scheme
    (``javascript:`` and friends) are replaced by ``#``. Images may use
    ``data:`` URLs of common raster formats.
    """
    url = unescape_backslashes(url.strip())
    match = _SCHEME.match(url)
    if match and match.group(1).lower() in UNSAFE_SCHEMES:
        if not (image and url.lower().startswith(SAFE_DATA_IMAGES)):
            return "#"
    return quote(url, safe="/:?#[]@!$&'()*+,;=-._~%")


def is_entity(text: str) -> bool:
    return bool(_ENTITY.fullmatch(text))
