"""Exceptions raised by switchyard."""


class RoutingError(Exception):
    """Base class for all routing errors."""


class RouteError(RoutingError, ValueError):
    """A route pattern is malformed or uses an unknown converter."""


class ValidationError(RoutingError, ValueError):
    """A converter rejected a matched path segment (the route does not match)."""


class NotFound(RoutingError):
    """No route matches the requested path."""

    status = 404

    def __init__(self, path):
        super().__init__(f"no route matches {path!r}")
        self.path = path


class MethodNotAllowed(RoutingError):
    """A route matches the path, but not for the requested method."""

    status = 405

    def __init__(self, method, path, allowed):
        allowed = sorted(allowed)
        super().__init__(f"{method} not allowed for {path!r} (allowed: {', '.join(allowed)})")
        self.method = method
        self.path = path
        self.allowed = allowed


class RequestRedirect(RoutingError):
    """The path only matches with a trailing slash added or removed."""

    status = 308

    def __init__(self, location):
        super().__init__(f"redirect to {location!r}")
        self.location = location


class BuildError(RoutingError, LookupError):
    """url_for() could not build a URL (unknown name or missing values)."""
