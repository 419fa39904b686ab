"""A real HTTP server that speaks OpenAI chat completions the way SGLang does, answering from a script.

It stands in for SGLang where no GPU exists (same JSON shapes, same extra endpoints, Prometheus metrics in SGLang's
names and labels), drives deterministic test cases (errors, delays, hangs, garbage, misconfigured-parser output,
tasks that resolve at a scripted rate) and, in `instant` mode, serves a benchmark fast enough not to be the
bottleneck. Embed it, `with ScriptedServer(script) as server: server.base_url`, or run it:
`python -m support.sglang_fake --script FILE`.

`script` holds the script models, `app` the application, `shapes` SGLang's JSON, `metrics` its Prometheus text,
`serving` the aiohttp server, `launcher` the thread, subprocess and command-line modes.
"""

from support.sglang_fake.app import RecordedRequest
from support.sglang_fake.launcher import ScriptedServer, main
from support.sglang_fake.script import InstantSpec, Script, TaskScript, ToolCallSpec, TurnSpec, UsageSpec, load_script

__all__ = ["InstantSpec", "RecordedRequest", "Script", "ScriptedServer", "TaskScript", "ToolCallSpec", "TurnSpec",
           "UsageSpec", "load_script", "main"]
