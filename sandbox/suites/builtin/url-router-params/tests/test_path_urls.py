import unittest
import uuid
from urllib.parse import unquote

from switchyard import BuildError, NotFound, RequestRedirect, Router


def make_router():
    router = Router()
    router.add("/files/<path:filepath>", lambda **kw: kw, name="file")
    router.add("/repos/<path:repo>/issues/<int:number>", lambda **kw: kw, name="issue")
    router.add("/users/<name>", lambda **kw: kw, name="user")
    router.add("/posts/<int:post_id>", lambda **kw: kw, name="post")
    router.add("/items/<uuid:item_id>", lambda **kw: kw, name="item")
    router.add("/export.<any(json, csv):fmt>", lambda **kw: kw, name="export")
    router.add("/docs/", lambda **kw: kw, name="docs")
    return router


class TestFailToPassPathUrls(unittest.TestCase):
    def setUp(self):
        self.router = make_router()

    def test_slashes_in_path_parameter_are_kept(self):
        self.assertEqual(self.router.url_for("file", filepath="docs/guide.md"), "/files/docs/guide.md")
        self.assertEqual(self.router.url_for("file", filepath="a/b/c/d.txt"), "/files/a/b/c/d.txt")

    def test_path_parameter_segments_are_still_encoded(self):
        self.assertEqual(
            self.router.url_for("file", filepath="reports/2024 Q1/r\u00e9sum\u00e9.pdf"),
            "/files/reports/2024%20Q1/r%C3%A9sum%C3%A9.pdf",
        )
        self.assertEqual(self.router.url_for("file", filepath="a/b?c#d"), "/files/a/b%3Fc%23d")
        self.assertEqual(self.router.url_for("file", filepath="x/100%"), "/files/x/100%25")

    def test_path_parameter_in_the_middle(self):
        self.assertEqual(
            self.router.url_for("issue", repo="acme/widgets", number=17),
            "/repos/acme/widgets/issues/17",
        )

    def test_path_parameter_with_query(self):
        self.assertEqual(
            self.router.url_for("file", filepath="img/logo.png", _query={"v": "3"}),
            "/files/img/logo.png?v=3",
        )

    def test_round_trip_without_encoded_slashes(self):
        for value in ["a/b", "deep/er/path/file name.txt", "single.txt", "dir/"]:
            with self.subTest(value=value):
                url = self.router.url_for("file", filepath=value)
                self.assertNotIn("%2F", url.upper())
                match = self.router.match("GET", unquote(url))
                self.assertEqual(match.route.name, "file")
                self.assertEqual(match.params, {"filepath": value})


class TestPassToPassRouting(unittest.TestCase):
    def setUp(self):
        self.router = make_router()

    def test_string_parameter_still_escapes_slash(self):
        self.assertEqual(self.router.url_for("user", name="a/b"), "/users/a%2Fb")
        self.assertEqual(self.router.url_for("user", name="ann lee"), "/users/ann%20lee")

    def test_other_converters_build(self):
        uid = uuid.UUID("12345678-1234-5678-1234-567812345678")
        self.assertEqual(self.router.url_for("post", post_id=5), "/posts/5")
        self.assertEqual(self.router.url_for("item", item_id=uid), f"/items/{uid}")
        self.assertEqual(self.router.url_for("export", fmt="json"), "/export.json")
        with self.assertRaises(BuildError):
            self.router.url_for("export", fmt="xml")
        with self.assertRaises(BuildError):
            self.router.url_for("file")

    def test_path_converter_matching(self):
        self.assertEqual(
            self.router.match("GET", "/files/a/b/c.txt").params, {"filepath": "a/b/c.txt"}
        )
        self.assertEqual(
            self.router.match("GET", "/repos/acme/widgets/issues/17").params,
            {"repo": "acme/widgets", "number": 17},
        )
        with self.assertRaises(NotFound):
            self.router.match("GET", "/files/")

    def test_trailing_slash_redirect(self):
        with self.assertRaises(RequestRedirect) as cm:
            self.router.match("GET", "/docs")
        self.assertEqual(cm.exception.location, "/docs/")

    def test_string_parameter_is_one_segment(self):
        self.assertEqual(self.router.match("GET", "/users/bob").params, {"name": "bob"})
        with self.assertRaises(NotFound):
            self.router.match("GET", "/users/bob/extra")


if __name__ == "__main__":
    unittest.main()
