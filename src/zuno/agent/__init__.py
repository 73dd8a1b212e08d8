"""The agent session: providers, the loop, modes, reconciliation, compaction, the dynamic context."""
