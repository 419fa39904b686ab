"""A small WSGI middleware built on the limiters."""

import json

from .policy import KeyedLimiter


def client_ip(environ):
    forwarded = environ.get("HTTP_X_FORWARDED_FOR", "")
    if forwarded:
        return forwarded.split(",")[0].strip()
    return environ.get("REMOTE_ADDR", "unknown")


class RateLimitMiddleware:
    """Wraps a WSGI app; requests over the limit get ``429 Too Many Requests``.

    ``factory`` builds the limiter for one client; ``key_func(environ)``
    picks the client key (default: client IP); ``cost_func(environ)`` the
    cost of a request (default: 1).
    """

    def __init__(self, app, factory, key_func=client_ip, cost_func=None, max_keys=10_000):
        self.app = app
        self.limiters = KeyedLimiter(factory, max_keys=max_keys)
        self.key_func = key_func
        self.cost_func = cost_func or (lambda environ: 1)

    def __call__(self, environ, start_response):
        decision = self.limiters.acquire(self.key_func(environ), self.cost_func(environ))
        headers = list(decision.headers().items())
        if not decision.allowed:
            body = json.dumps({"error": "rate limit exceeded",
                               "retry_after": decision.headers().get("Retry-After")}).encode()
            start_response("429 Too Many Requests",
                           [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))] + headers)
            return [body]

        def start_with_headers(status, response_headers, exc_info=None):
            return start_response(status, list(response_headers) + headers, exc_info)

        return self.app(environ, start_with_headers)
