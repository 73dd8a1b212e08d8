"""Tool families: one module or package per family, each with ``register(registry)``."""
