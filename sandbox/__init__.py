"""Where tools run: tasks and their loading, the sandbox protocol and its backends (bubblewrap on this host, a
container engine, Kubernetes pods), Leaf's five tools, patch capture and grading."""

from sandbox.backends import (BACKENDS, Backend, BackendName, backend_for, close_backend, open_sandbox,
                              remove_leftovers, require_backend)
from sandbox.local.environment import BuiltEnvironment, build_environment
from sandbox.grading import GradeResult, Verification, run_oracle, verify
from sandbox.harbor import TaskFormatError, load_harbor_task
from sandbox.leaf_tools import LEAF_TOOL_NAMES, LEAF_TOOLS, bash_arguments
from sandbox.local.bwrap import LocalSandbox, require_isolation
from sandbox.reward_hacking import harness_paths
from sandbox.protocol import (BuildError, ExecResult, OpenedSandbox, Sandbox, SandboxError, SandboxOptions,
                              SandboxSpec, write_file)
from sandbox.suites import BUILTIN_SUITE, load_suite
from sandbox.swebench import SWEBenchImages
from sandbox.tasks import Suite, SuiteError, Task, TaskLoadError

__all__ = [
    "BACKENDS", "BUILTIN_SUITE", "Backend", "BackendName", "BuildError", "BuiltEnvironment", "ExecResult",
    "GradeResult", "LEAF_TOOLS", "LEAF_TOOL_NAMES", "LocalSandbox", "OpenedSandbox", "SWEBenchImages", "Sandbox",
    "SandboxError", "SandboxOptions", "SandboxSpec", "Suite", "SuiteError", "Task", "TaskFormatError", "TaskLoadError",
    "Verification", "backend_for", "bash_arguments", "build_environment", "close_backend", "harness_paths",
    "load_harbor_task", "load_suite", "open_sandbox", "remove_leftovers", "require_backend", "require_isolation",
    "run_oracle", "verify", "write_file",
]
