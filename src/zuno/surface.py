"""Profiles, registered slots, allowlists and extension tools: which tools a session sees.

A profile lists the spec's tool names: those on its default surface and its registered slots
(available to an explicit allowlist or ``tools: {name: true}``, not shown by default). A name
whose tool is not built yet is simply absent — never a stub. Tool families register their
implementations per profile in their module's ``register(registry)``.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING

from zuno import limits
from zuno.config import Config, ConfigError, json_repr

if TYPE_CHECKING:  # (a command that only checks the config, zuno sessions, loads no tool machinery)
    from zuno.projection import GoalObserver, Refresher
    from zuno.tool import Tool

# The spec's names, in the spec's order. Default surface first, then registered slots.
PROFILE_DEFAULTS: dict[str, list[str]] = {
    "zuno": [
        "read",
        "glob",
        "grep",
        "write",
        "report_write",
        "apply_patch",
        "shell",
        "bg",
        "task",
        "session_message",
        "job",
        "webfetch",
        "web_search",
        "skill",
        "question",
        "question_async",
        "plan_exit",
        "plan_get",
        "plan_update",
        "todo_get",
        "todo_update",
        "goal_get",
        "goal_update",
        "goal_request_input",
    ],
    "chord": [
        "read",
        "write",
        "edit",
        "apply_patch",
        "delete",
        "view_image",
        "grep",
        "glob",
        "shell",
        "job_output",
        "job_list",
        "job_kill",
        "web_fetch",
        "web_search",
        "todo_write",
        "question",
        "skill",
        "save_artifact",
        "read_artifact",
    ],
}
PROFILE_SLOTS: dict[str, list[str]] = {
    "zuno": [
        "edit",
        "execute",
        "lsp",
        "memory_read",
        "memory_update",
        "council_run",
        "tool_search",
        "task_context",
        "history",
        "notes",
    ],
    "chord": ["done", "handoff", "delegate", "cancel", "complete", "escalate", "notify"],
}

# chord's editing styles: what each hides. "patch": apply_patch also creates and deletes files.
EDITING_HIDDEN: dict[str, tuple[str, ...]] = {"edit": ("apply_patch",), "patch": ("edit", "write", "delete")}

# Registered slots that appear only when a config section enables them (and then on the default
# surface too): the name -> (how to tell, what to set).
GATED_SLOTS: dict[str, tuple[Callable[[Config], bool], str]] = {
    "history": (lambda c: c.continuity.enabled, "continuity.enabled"),
    "notes": (lambda c: c.continuity.enabled, "continuity.enabled"),
    "memory_read": (lambda c: c.memory.enabled, "memory.enabled"),
    "memory_update": (lambda c: c.memory.enabled, "memory.enabled"),
}

# Tool families live in the zuno.tools package: every module (or subpackage) there that defines
# register(registry) is registered, and its MIGRATIONS (if any) are applied by the store.
TOOLS_PACKAGE = "zuno.tools"

ToolFactory = Callable[[], "Tool"]


@dataclass(frozen=True, slots=True)
class DeferredTool:
    """A tool factory that imports the tool's module when the tool is built (``build_surface``),
    not when its family registers: a registered slot off the surface (``task_context``, ``notes``,
    ``history``, memory) costs no import. ``module``.``cls`` is the Tool class, built with no
    arguments as a class factory is."""

    module: str
    cls: str

    def __call__(self) -> Tool:
        tool: Tool = getattr(importlib.import_module(self.module), self.cls)()
        return tool


@dataclass
class Registry:
    factories: dict[tuple[str, str], ToolFactory] = field(default_factory=dict)
    migrations: list[tuple[str, str]] = field(default_factory=list)
    # Dynamic-context refreshers (zuno.projection), rebuilt before every provider request.
    refreshers: list[tuple[str, Refresher]] = field(default_factory=list)
    # The Goal's progress observers, called by the agent loop's reconciliation in Goal mode
    # (zuno.projection.GoalObserver: the no_progress rule).
    goal_observers: list[GoalObserver] = field(default_factory=list)

    def add(self, name: str, factory: ToolFactory, profiles: tuple[str, ...] = ("zuno", "chord")) -> None:
        for p in profiles:
            self.factories[(p, name)] = factory

    def built(self, profile: str) -> dict[str, ToolFactory]:
        return {n: f for (p, n), f in self.factories.items() if p == profile}


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    global _DEFAULT
    if _DEFAULT is None:
        reg = Registry()
        package = importlib.import_module(TOOLS_PACKAGE)
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            module = importlib.import_module(f"{TOOLS_PACKAGE}.{info.name}")
            register = getattr(module, "register", None)
            if register is not None:
                register(reg)
                reg.migrations.extend(getattr(module, "MIGRATIONS", []))
        _DEFAULT = reg
    return _DEFAULT


def load_extensions(specs: list[str], root: Path) -> list[Tool]:
    """Import extension modules (a file path relative to the root, or a module name) and collect
    every function declared with ``@zuno.tool``."""
    found: list[Tool] = []
    for spec in specs:
        path = Path(spec)
        if not path.is_absolute():
            path = root / path
        try:
            if spec.endswith(".py") or path.is_file():
                if not path.is_file():
                    raise ConfigError(f"config key extensions: {spec!r} is not a file under {root}.")
                mod_name = f"zuno_ext_{abs(hash(str(path)))}"
                loader_spec = importlib.util.spec_from_file_location(mod_name, path)
                if loader_spec is None or loader_spec.loader is None:
                    raise ConfigError(f"config key extensions: {spec!r} cannot be imported.")
                module = importlib.util.module_from_spec(loader_spec)
                sys.modules[mod_name] = module
                loader_spec.loader.exec_module(module)
            else:
                module = importlib.import_module(spec)
        except ConfigError:
            raise
        except Exception as e:  # an extension's import error is a config error, named
            raise ConfigError(f"config key extensions: {spec!r} failed to import: {type(e).__name__}: {e}") from e
        tools = [v.__zuno_tool__ for v in vars(module).values() if hasattr(v, "__zuno_tool__")]
        if not tools:
            raise ConfigError(f"config key extensions: {spec!r} declares no @zuno.tool function.")
        found.extend(tools)
    return found


@dataclass
class Surface:
    profile: str
    tools: dict[str, Tool]
    disabled: dict[str, str]  # name -> why it is not available (config switch, allowlist)

    def names(self) -> list[str]:
        return list(self.tools)


def check_rule_tools(config: Config, extensions: set[str]) -> None:
    """A permission rule or hook whose tool names no tool would never apply: a "deny" of "shel"
    would leave shell allowed while reading as denied. Every name (or glob) there must match a tool
    of some profile (the config may serve both) or an extension. Patterns that may name connected
    MCP tools (``mcp_…``, or a glob starting with a wildcard) are known only once connected, and
    pass."""
    names = {n for table in (PROFILE_DEFAULTS, PROFILE_SLOTS) for tools in table.values() for n in tools}
    names |= extensions
    where = [(f"permission.rules.{i}.tool", r.tool) for i, r in enumerate(config.permission.rules)]
    where += [(f"hooks.pre_dispatch.{i}.tools", t) for i, h in enumerate(config.hooks.pre_dispatch) for t in h.tools]
    for key, pattern in where:
        if pattern.startswith(("mcp_", "*", "?", "[")) or any(fnmatchcase(n, pattern) for n in names):
            continue
        close = difflib.get_close_matches(pattern, sorted(names), n=2, cutoff=0.6)
        hint = f" Did you mean {' or '.join(json_repr(c) for c in close)}?" if close else ""
        raise ConfigError(
            f"config key {key} = {json_repr(pattern)} names no tool, so it would never apply.{hint} "
            f"Known: {', '.join(sorted(names))} (and connected MCP tools, mcp_<server>_<tool>)."
        )


_CALLABLE_NAME = re.compile(rf"[A-Za-z0-9_-]{{1,{limits.TOOL_NAME_MAX}}}")


def _extension_tools(found: list[tuple[Tool, str]], known: set[str]) -> dict[str, Tool]:
    """The extension tools by name; ``found`` pairs each with where it came from, for the error
    when one would shadow a built-in tool or two different tools share a name (the same tool
    found twice, as a module importing another's tool, is one)."""
    tools: dict[str, Tool] = {}
    where: dict[str, str] = {}
    rename = "give it another name (@zuno.tool(name=...), or the Tool's name)."
    for t, source in found:
        if not _CALLABLE_NAME.fullmatch(t.name):
            raise ConfigError(
                f"{source}: tool name {t.name[:80]!r} is not one a model can call: a tool name is 1 to "
                f"{limits.TOOL_NAME_MAX} letters, digits, '_' or '-' (the providers' rule); {rename}"
            )
        if t.name in known:
            raise ConfigError(f"{source}: tool {t.name!r} would shadow the built-in tool of that name: {rename}")
        seen = tools.get(t.name)
        if seen is not None and seen is not t:
            raise ConfigError(
                f"{source}: two different tools are named {t.name!r} (the other from {where[t.name]}): "
                f"one would silently replace the other; {rename}"
            )
        tools[t.name], where[t.name] = t, source
    return tools


def _checked(
    config: Config, root: Path, profile: str, extra_tools: list[Tool] | None
) -> tuple[set[str], dict[str, Tool]]:
    """The profile's known tool names and the extension tools, once every name the config gives
    (agent.tools, permission rules and hooks, tools.<name>) is checked: a ConfigError otherwise.
    Imports the config's extensions, not the tool families (no registry)."""
    if profile not in PROFILE_DEFAULTS:
        raise ConfigError(f"unknown profile {profile!r}: choose one of {', '.join(sorted(PROFILE_DEFAULTS))}.")
    known = set(PROFILE_DEFAULTS[profile]) | set(PROFILE_SLOTS[profile])
    extensions = _extension_tools(
        [(t, "config key extensions") for t in load_extensions(config.extensions, root)]
        + [(t, "Runtime(tools=...)") for t in extra_tools or []],
        known,
    )
    for name in config.agent.tools or ():
        if name not in known and name not in extensions:
            raise ConfigError(
                f"config key agent.tools: {name!r} is not a tool of profile {profile!r}. "
                f"Known: {', '.join(sorted(known | set(extensions)))}."
            )
    check_rule_tools(config, set(extensions))
    for name in config.tools:
        if name not in known and name not in extensions:
            raise ConfigError(
                f"config key tools.{name}: not a tool of profile {profile!r}. "
                f"Known: {', '.join(sorted(known | set(extensions)))}."
            )
    return known, extensions


def check_surface_config(config: Config, root: Path) -> None:
    """What ``build_surface`` refuses in the config (the same ConfigError), without building the
    surface: a command that only reads the store (``zuno sessions``) checks the config as every
    command does, but imports no tool family."""
    _checked(config, root, config.profile, None)


def build_surface(
    config: Config,
    root: Path,
    registry: Registry | None = None,
    profile: str | None = None,
    extra_tools: list[Tool] | None = None,
) -> Surface:
    """The surface of a profile. ``extra_tools`` (``Runtime(tools=...)``) join the config's
    extensions and follow the same rules (no shadowing, the tools switch, the allowlist)."""
    profile = profile or config.profile
    if profile not in PROFILE_DEFAULTS:
        raise ConfigError(f"unknown profile {profile!r}: choose one of {', '.join(sorted(PROFILE_DEFAULTS))}.")
    registry = registry or default_registry()
    built = registry.built(profile)
    known, extensions = _checked(config, root, profile, extra_tools)
    disabled: dict[str, str] = {}

    allow = config.agent.tools
    if allow is not None:
        wanted = list(allow)
    else:
        wanted = [*PROFILE_DEFAULTS[profile], *extensions]
        wanted += [n for n, on in config.tools.items() if on and n in PROFILE_SLOTS[profile]]
        if profile == "chord":
            # The chord model sees one of edit / apply_patch (config editing.style).
            hidden = EDITING_HIDDEN[config.editing.style]
            for name in hidden:
                if name in wanted and name in built and config.tools.get(name) is not True:
                    wanted.remove(name)
                    disabled[name] = (
                        f"hidden by editing.style = {config.editing.style!r} (chord shows one editing style)"
                    )
    if allow is None:
        wanted += [n for n, (on, _key) in GATED_SLOTS.items() if n in known and on(config) and n not in wanted]
    for name, (on, key) in GATED_SLOTS.items():
        if name in known and not on(config):
            if name in wanted:
                wanted.remove(name)
            if name in built:
                disabled[name] = f"off: set {key} = true to enable it"
    tools: dict[str, Tool] = {}
    for name in wanted:
        if config.tools.get(name) is False:
            disabled[name] = f"disabled by the config (tools.{name} = false)"
            continue
        if name in extensions:
            tools[name] = extensions[name]
        elif name in built:
            tools[name] = built[name]()
    # In the profile's order (a set's order changed with the hash seed: the same config listed
    # its unavailable tools in another order at every start).
    for name in dict.fromkeys([*PROFILE_DEFAULTS[profile], *PROFILE_SLOTS[profile]]):
        if name in tools or name in disabled:
            continue
        if name in built and name not in wanted:
            disabled[name] = (
                f"not in the agent's tools allowlist (agent.tools): add {name!r} to it to offer it"
                if allow is not None
                else f'a registered slot, not on the default surface: "tools": {{"{name}": true}} offers it'
            )
    return Surface(profile, tools, disabled)
