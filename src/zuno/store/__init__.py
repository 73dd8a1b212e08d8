"""The durable store: the only holder of durable facts."""

from zuno.store.sqlite import CallRow, SessionBusy, Store, StoreUnusable

__all__ = ["CallRow", "SessionBusy", "Store", "StoreUnusable"]
