"""The reading of a shell command, in parts; ``zuno.tools.shell.analysis.analyze`` is its entry."""
