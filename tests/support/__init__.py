"""Helpers shared by the test suites and `bench/`, importable as `support` with `tests/` on the path (pytest puts
it there for `tests/conftest.py`). Not part of the product: the wheel does not ship `tests/`."""
