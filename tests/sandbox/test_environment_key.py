"""The environment's content key: the same files give the same key without being read again, and any change to
a file's content (even at the same size) gives a new one."""

from __future__ import annotations

import os

from sandbox import SandboxOptions
from sandbox.shared.digests import _digest_of
from sandbox.local.environment import environment_key


def test_the_key_follows_the_build_context_and_unchanged_files_are_not_read_again(make_task, tmp_path):
    task = make_task("keyed")
    options = SandboxOptions(cache_dir=tmp_path / "cache")
    first = environment_key(task, options)
    reads = _digest_of.cache_info().misses
    assert environment_key(task, options) == first
    assert _digest_of.cache_info().misses == reads  # every digest came from the cache
    source = task.build_context / "repo" / "calc.py"
    stat = source.stat()
    source.write_text(source.read_text().replace("a - b", "a + b"))  # same size, new content
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    changed = environment_key(task, options)
    assert changed != first
    source.write_text(source.read_text().replace("a + b", "a - b"))
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000))
    assert environment_key(task, options) == first  # back to the same content, back to the same key
