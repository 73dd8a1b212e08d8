"""A child process for the kill -9 test: one agent turn whose step runs a read, then a long shell
command (a barrier), then another read; it prints the session id once the shell call starts."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import zuno
from agent_double import ScriptedProvider, call, calls, say
from zuno.agent.events import ToolCallEvent


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


asyncio.run(main(sys.argv[1]))
