"""Analysis: a KernelGraph -> Features, the numbers the planner decides from."""

from rblock.analysis.features import Features, Hint, analyze

__all__ = ["Features", "Hint", "analyze"]
