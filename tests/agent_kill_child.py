"""A child process for the kill -9 tests: one agent turn whose step runs a read, then a long shell
command (a barrier), then another read; it prints the session id once the shell call starts.
With "readonly": one turn whose step runs only read-only calls, one of them slow; it prints the
session id once that call runs."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import zuno
from agent_double import ScriptedProvider, call, calls, say
from zuno.agent.events import ToolCallEvent
from zuno.declarations import READ_ONLY_PARALLEL
from zuno.tool import Tool, ToolArgs, ToolContext, ToolOutput


class SlowLook(Tool):
    name = "slow_look"
    description = "Look for a long time (read-only)."
    Args = ToolArgs
    declarations = READ_ONLY_PARALLEL

    async def run(self, ctx: ToolContext, args: object) -> ToolOutput:
        print(f"SESSION {ctx.session_id}", flush=True)
        await asyncio.sleep(60)
        return ToolOutput(text="never")


async def read_only(root: str) -> None:
    step = calls(call("read", {"path": "a.txt"}, id="r_read_a"), call("slow_look", {}, id="r_slow"))
    p = ScriptedProvider([step, say("unreachable")])
    async with zuno.Runtime(root=root, tools=[SlowLook()]) as rt:
        async with rt.agent(provider=p) as agent:
            await agent.run("look around")


async def main(root: str) -> None:
    step = calls(
        call("read", {"path": "a.txt"}, id="k_read_a"),
        call("shell", {"command": "sleep 61.25; echo never"}, id="k_shell"),
        call("read", {"path": "b.txt"}, id="k_read_b"),
    )
    p = ScriptedProvider([step, say("unreachable")])
    overrides = {"permission": {"rules": [{"tool": "shell", "action": "allow"}]}}
    async with zuno.Runtime(root=root, config_overrides=overrides) as rt:
        async with rt.agent(provider=p) as agent:

            def on(ev: object) -> None:
                if isinstance(ev, ToolCallEvent) and ev.name == "shell":
                    print(f"SESSION {agent.id}", flush=True)

            await agent.run("do three things", on_event=on)


asyncio.run(read_only(sys.argv[1]) if sys.argv[2:] == ["readonly"] else main(sys.argv[1]))
