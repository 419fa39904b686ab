"""Dockerfile parsing: the instructions the local sandbox replays, with line numbers for errors."""

import pytest

from sandbox.dockerfile import DockerfileError, parse_dockerfile, substitute


def parse(tmp_path, text):
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return parse_dockerfile(path)


def test_continuations_comments_and_forms(tmp_path):
    steps = parse(tmp_path, """# a comment
FROM python:3.11-slim AS base
ARG VERSION=1.2
ENV A=1 B="two words"
ENV LEGACY some value
WORKDIR /app
COPY --chown=1000:1000 repo/ /app/
RUN echo one && \\
    echo two
RUN ["python3", "-c", "print(1)"]
CMD ["python3"]
""")
    assert [(s.keyword, s.line) for s in steps] == [
        ("FROM", 2), ("ARG", 3), ("ENV", 4), ("ENV", 5), ("WORKDIR", 6), ("COPY", 7), ("RUN", 8), ("RUN", 10),
        ("CMD", 11)]
    assert steps[0].args == ["python:3.11-slim"]
    assert steps[2].args == ["A", "1", "B", "two words"]
    assert steps[3].args == ["LEGACY", "some value"]
    assert steps[5].args == ["repo/", "/app/"]
    assert steps[6].args == ["echo one &&  echo two"]
    assert steps[7].args == ["python3 -c 'print(1)'"]


def test_unknown_instruction_names_line(tmp_path):
    with pytest.raises(DockerfileError, match=r"Dockerfile:3: unknown instruction 'FRM'"):
        parse(tmp_path, "FROM x\nWORKDIR /app\nFRM y\n")


def test_multistage_copy_refused(tmp_path):
    with pytest.raises(DockerfileError, match=r"Dockerfile:2: COPY --from"):
        parse(tmp_path, "FROM x\nCOPY --from=builder /a /b\n")


def test_missing_from(tmp_path):
    with pytest.raises(DockerfileError, match="no FROM"):
        parse(tmp_path, "WORKDIR /app\n")


def test_substitute_forms():
    assert substitute("$A/${B}/${C:-dflt}/${A:-x}", {"A": "1", "B": "2"}) == "1/2/dflt/1"
