"""Zuno: a tool runtime for coding agents."""

from zuno.config import Config, ConfigError, load_config
from zuno.declarations import BlockKind, Concurrency, Declarations, Effect, Outcome, Replay
from zuno.permissions import ApprovalRequest, Approver, AutoApprover, NoApprover
from zuno.records import CallRecord, StepResult
from zuno.runtime import Runtime, Session
from zuno.store import SessionBusy
from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput, TransientError, tool

__all__ = [
    "ApprovalRequest",
    "Approver",
    "AutoApprover",
    "BlockKind",
    "CallRecord",
    "Concurrency",
    "Config",
    "ConfigError",
    "Declarations",
    "Effect",
    "NoApprover",
    "Outcome",
    "Refused",
    "Replay",
    "Runtime",
    "Session",
    "SessionBusy",
    "StepResult",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolOutput",
    "TransientError",
    "load_config",
    "tool",
]
