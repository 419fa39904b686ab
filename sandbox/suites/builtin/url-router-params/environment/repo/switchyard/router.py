"""The router: route registration, method dispatch and URL building."""

from dataclasses import dataclass, field

from .errors import BuildError, MethodNotAllowed, NotFound, RequestRedirect, RouteError
from .pattern import RoutePattern


@dataclass
class Route:
    pattern: RoutePattern
    handler: object
    methods: frozenset
    name: str

    def __repr__(self):
        return f"<Route {self.name} {self.pattern.pattern} {sorted(self.methods)}>"


@dataclass
class Match:
    route: Route
    params: dict = field(default_factory=dict)

    @property
    def handler(self):
        return self.route.handler

    def __iter__(self):
        # allows ``handler, params = router.match(...)``
        yield self.route.handler
        yield self.params


class Router:
    """Maps (method, path) to handlers.

    ``path`` is the decoded request path (like WSGI's ``PATH_INFO``).

    With ``strict_slashes=False`` (the default) a request whose path only
    matches a route once a trailing slash is added or removed raises
    :class:`RequestRedirect` pointing at the canonical URL instead of
    :class:`NotFound`.
    """

    def __init__(self, strict_slashes=False, converters=None):
        self.strict_slashes = strict_slashes
        self.converters = dict(converters or {})
        self._routes = []
        self._by_name = {}

    def add(self, pattern, handler, methods=("GET",), name=None):
        if isinstance(methods, str):
            methods = (methods,)
        methods = frozenset(m.upper() for m in methods)
        if "GET" in methods:
            methods |= {"HEAD"}
        name = name or getattr(handler, "__name__", None) or pattern
        if name in self._by_name:
            raise RouteError(f"duplicate route name {name!r}")
        route = Route(RoutePattern(pattern, self.converters), handler, methods, name)
        self._routes.append(route)
        self._routes.sort(key=lambda r: r.pattern.sort_key())
        self._by_name[name] = route
        return route

    def route(self, pattern, methods=("GET",), name=None):
        """Decorator form of :meth:`add`."""

        def decorator(handler):
            self.add(pattern, handler, methods=methods, name=name)
            return handler

        return decorator

    @property
    def routes(self):
        return list(self._routes)

    def _candidates(self, path):
        for route in self._routes:
            params = route.pattern.match(path)
            if params is not None:
                yield route, params

    def match(self, method, path):
        """Returns a :class:`Match` or raises NotFound / MethodNotAllowed /
        RequestRedirect."""
        method = method.upper()
        allowed = set()
        for route, params in self._candidates(path):
            if method in route.methods:
                return Match(route, params)
            allowed |= route.methods
        if allowed:
            raise MethodNotAllowed(method, path, allowed)

        if not self.strict_slashes and path != "/":
            alternative = path[:-1] if path.endswith("/") else path + "/"
            for route, _ in self._candidates(alternative):
                if method in route.methods:
                    raise RequestRedirect(alternative)
        raise NotFound(path)

    def url_for(self, endpoint, /, _query=None, **values):
        """Builds the URL of the route called ``endpoint``; ``_query`` is an
        optional mapping appended as the query string."""
        try:
            route = self._by_name[endpoint]
        except KeyError:
            raise BuildError(f"no route named {endpoint!r}") from None
        return route.pattern.build(values, query=_query)
