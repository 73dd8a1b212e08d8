"""The durable store: the only holder of durable facts."""

from zuno.store.paths import StoreUnusable
from zuno.store.sqlite import CallRow, SessionBusy, Store, StoreLocked

__all__ = ["CallRow", "SessionBusy", "Store", "StoreLocked", "StoreUnusable"]
