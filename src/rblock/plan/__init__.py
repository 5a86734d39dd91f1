"""Planner: Features -> candidate configs with reasons (candidates.py), thresholds (heuristics.py)."""

from rblock.plan.candidates import Plan, plan, seed_applies
from rblock.plan.config import Candidate, Config
from rblock.plan.heuristics import DEFAULT, Heuristics

__all__ = ["DEFAULT", "Candidate", "Config", "Heuristics", "Plan", "plan", "seed_applies"]
