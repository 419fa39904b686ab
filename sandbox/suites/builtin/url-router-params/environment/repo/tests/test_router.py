import unittest
import uuid

from switchyard import (
    BuildError,
    MethodNotAllowed,
    NotFound,
    RequestRedirect,
    RouteError,
    Router,
)


def handler(name):
    def h(**kwargs):
        return name, kwargs

    h.__name__ = name
    return h


class RouterMatchTests(unittest.TestCase):
    def setUp(self):
        self.router = Router()
        self.router.add("/", handler("index"))
        self.router.add("/users/<name>", handler("user"))
        self.router.add("/users/me", handler("me"))
        self.router.add("/posts/<int:post_id>", handler("post"))
        self.router.add("/posts/<int:post_id>", handler("edit_post"), methods=["PUT"])
        self.router.add("/items/<uuid:item_id>", handler("item"))
        self.router.add("/export.<any(json, csv):fmt>", handler("export"))
        self.router.add("/docs/", handler("docs"))

    def test_static_and_params(self):
        self.assertEqual(self.router.match("GET", "/").route.name, "index")
        m = self.router.match("GET", "/users/alice")
        self.assertEqual((m.route.name, m.params), ("user", {"name": "alice"}))

    def test_static_route_wins(self):
        self.assertEqual(self.router.match("GET", "/users/me").route.name, "me")

    def test_converters(self):
        self.assertEqual(self.router.match("GET", "/posts/7").params, {"post_id": 7})
        uid = uuid.uuid4()
        self.assertEqual(self.router.match("GET", f"/items/{uid}").params, {"item_id": uid})
        self.assertEqual(self.router.match("GET", "/export.csv").params, {"fmt": "csv"})
        with self.assertRaises(NotFound):
            self.router.match("GET", "/posts/abc")

    def test_methods(self):
        self.assertEqual(self.router.match("PUT", "/posts/7").route.name, "edit_post")
        self.assertEqual(self.router.match("HEAD", "/posts/7").route.name, "post")
        with self.assertRaises(MethodNotAllowed) as cm:
            self.router.match("DELETE", "/posts/7")
        self.assertEqual(cm.exception.allowed, ["GET", "HEAD", "PUT"])

    def test_trailing_slash_redirect(self):
        with self.assertRaises(RequestRedirect) as cm:
            self.router.match("GET", "/docs")
        self.assertEqual(cm.exception.location, "/docs/")
        strict = Router(strict_slashes=True)
        strict.add("/docs/", handler("docs"))
        with self.assertRaises(NotFound):
            strict.match("GET", "/docs")

    def test_unpacking(self):
        h, params = self.router.match("GET", "/posts/3")
        self.assertEqual(h(**params), ("post", {"post_id": 3}))


class UrlForTests(unittest.TestCase):
    def setUp(self):
        self.router = Router()
        self.router.add("/users/<name>", handler("user"))
        self.router.add("/posts/<int:post_id>", handler("post"))

    def test_build(self):
        self.assertEqual(self.router.url_for("post", post_id=12), "/posts/12")
        self.assertEqual(self.router.url_for("user", name="ann lee"), "/users/ann%20lee")
        self.assertEqual(
            self.router.url_for("post", post_id=1, _query={"page": 2}), "/posts/1?page=2"
        )

    def test_build_errors(self):
        with self.assertRaises(BuildError):
            self.router.url_for("post")
        with self.assertRaises(BuildError):
            self.router.url_for("post", post_id="x")
        with self.assertRaises(BuildError):
            self.router.url_for("nope")


class PatternErrorTests(unittest.TestCase):
    def test_bad_patterns(self):
        router = Router()
        for pattern in ["users", "/a/<nope:x>", "/a/<x>/<x>", "/a/<int(min=):x>", "/a/<x"]:
            with self.subTest(pattern=pattern), self.assertRaises(RouteError):
                router.add(pattern, handler("h" + str(abs(hash(pattern)))))


if __name__ == "__main__":
    unittest.main()
