"""Where tools run: tasks and their loading, the local bubblewrap sandbox, Leaf's five tools, patch and grading."""

from sandbox.environment import (BuildError, BuiltEnvironment, OpenedSandbox, SandboxSpec, build_environment,
                                 open_sandbox, remove_leftovers)
from sandbox.grading import GradeResult, Verification, run_oracle, verify
from sandbox.harbor import TaskFormatError, load_harbor_task
from sandbox.leaf_tools import LEAF_TOOL_NAMES, LEAF_TOOLS, bash_arguments
from sandbox.local import ExecResult, LocalSandbox, SandboxError, SandboxOptions, require_isolation
from sandbox.suites import BUILTIN_SUITE, SuiteError, load_suite
from sandbox.tasks import Suite, Task, TaskLoadError

__all__ = [
    "BUILTIN_SUITE", "BuildError", "BuiltEnvironment", "ExecResult", "GradeResult", "LEAF_TOOLS",
    "LEAF_TOOL_NAMES", "LocalSandbox", "OpenedSandbox", "SandboxError", "SandboxOptions", "SandboxSpec",
    "Suite", "SuiteError", "Task", "TaskFormatError", "TaskLoadError", "Verification", "bash_arguments",
    "build_environment", "load_harbor_task", "load_suite", "open_sandbox", "remove_leftovers", "require_isolation",
    "run_oracle", "verify",
]
