"""The durable store: the only holder of durable facts."""

from zuno.store.sqlite import CallRow, SessionBusy, Store

__all__ = ["CallRow", "SessionBusy", "Store"]
