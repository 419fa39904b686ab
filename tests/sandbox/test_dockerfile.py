"""Dockerfile parsing: the instructions the local sandbox replays (with line numbers for errors, and the backend to use
for what it cannot replay), and the images a build starts from."""

import pytest

from sandbox.shared.dockerfile import DockerfileError, base_images, parse_dockerfile, replace_base_images, substitute


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


def test_what_the_local_backend_cannot_replay_names_the_backends_that_can(tmp_path):
    needs = "the task needs --backend podman (or docker; in a run spec, `backend:` under `sandbox:`)"
    with pytest.raises(DockerfileError) as multi:
        parse(tmp_path, "FROM x\nCOPY --from=builder /a /b\n")
    with pytest.raises(DockerfileError) as heredoc:
        parse(tmp_path, "FROM x\nWORKDIR /app\nRUN <<EOF\necho hi\nEOF\n")
    assert str(multi.value) == (f"Dockerfile:2: COPY --from (a multi-stage build) is not supported by the local "
                                f"backend: {needs}")
    assert str(heredoc.value) == f"Dockerfile:3: heredocs are not supported by the local backend: {needs}"


def test_missing_from(tmp_path):
    with pytest.raises(DockerfileError, match="no FROM"):
        parse(tmp_path, "WORKDIR /app\n")


def test_substitute_forms():
    assert substitute("$A/${B}/${C:-dflt}/${A:-x}", {"A": "1", "B": "2"}) == "1/2/dflt/1"


# --- the images a build starts from, which the container backend names as Docker does ------------------------------
MULTI_STAGE = f"""# syntax=docker/dockerfile:1
ARG BASE=python:3.11
FROM --platform=linux/amd64 golang:1.22 AS Build
RUN echo FROM nothing \\
  FROM alpine
COPY --from=build /a /b
COPY --from=ghcr.io/astral-sh/uv:0.5 /uv /bin/
COPY --from=0 /x /y
RUN <<EOF
FROM python:3.9
EOF
FROM $BASE
from scratch
FROM build as again
  FROM user/app@sha256:{"ab" * 32}
COPY --chown=1 --from=alpine:3 /a /b
"""


def test_base_images_are_the_froms_and_copy_froms_that_name_images():
    """Not a stage (case-insensitive), `scratch`, a stage index, an ARG the engine fills in, a continued line or a
    heredoc's body."""
    assert base_images(MULTI_STAGE) == ["golang:1.22", "ghcr.io/astral-sh/uv:0.5", f"user/app@sha256:{'ab' * 32}",
                                        "alpine:3"]


def test_renaming_base_images_changes_nothing_else():
    renamed = replace_base_images(MULTI_STAGE, {"golang:1.22": "docker.io/library/golang:1.22",
                                                "alpine:3": "docker.io/library/alpine:3"})
    assert renamed == (MULTI_STAGE.replace("FROM --platform=linux/amd64 golang:1.22",
                                           "FROM --platform=linux/amd64 docker.io/library/golang:1.22")
                       .replace("--from=alpine:3", "--from=docker.io/library/alpine:3"))
    assert replace_base_images("FROM x\r\nRUN true\r\n", {"x": "docker.io/library/x"}) == \
        "FROM docker.io/library/x\r\nRUN true\r\n"
    escaped = "# escape=`\nFROM a AS b `\n  --platform=x\nFROM c\n"
    assert base_images(escaped) == ["a", "c"]


# --- the local backend's refusals say which backend runs the task as written -----------------------------------------
@pytest.mark.parametrize("dockerfile, refusal", [
    ("FROM python:3.11-slim\nCOPY repo/ /app/\n", "the Dockerfile sets no WORKDIR, which the local backend needs"),
    ("FROM python:3.11-slim\nRUN true\nWORKDIR /app\n", "Dockerfile:2: RUN before any WORKDIR is not supported"),
    ("FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/calc.py /etc/\n", "Dockerfile:3: COPY into /etc/ is not "
                                                                      "supported by the local backend"),
    ("FROM python:3.11-slim AS a\nFROM a\nWORKDIR /app\n", "Dockerfile:2: a second FROM (a multi-stage build)"),
    ("FROM python:3.11-slim\nWORKDIR /app\nADD https://example.com/x /app/x\n", "Dockerfile:3: ADD from a URL"),
])
def test_the_local_backend_refuses_what_it_cannot_replay_naming_the_backend_that_can(make_task, tmp_path, dockerfile,
                                                                                     refusal):
    import asyncio

    from sandbox import BuildError, SandboxOptions, open_sandbox

    task = make_task("refused", files={"environment/Dockerfile": dockerfile})
    with pytest.raises(BuildError) as refused:
        asyncio.run(open_sandbox(task, SandboxOptions(cache_dir=tmp_path / "cache")))
    message = str(refused.value)
    assert message.startswith("task refused: ") and refusal in message, message
    assert message.endswith(": the task needs --backend podman (or docker; in a run spec, `backend:` under "
                            "`sandbox:`)"), message


def test_task_fields_the_local_backend_cannot_honour_name_the_backend_that_can(make_task, tmp_path):
    import asyncio

    from sandbox import BuildError, SandboxOptions, open_sandbox

    task = make_task("as-user")
    task.config.agent.user = "agent"
    with pytest.raises(BuildError) as refused:
        asyncio.run(open_sandbox(task, SandboxOptions(cache_dir=tmp_path / "cache")))
    assert str(refused.value) == ("task as-user: the local backend cannot honour agent.user (everything runs as one "
                                  "unprivileged user): the task needs --backend podman (or docker; in a run spec, "
                                  "`backend:` under `sandbox:`)")
