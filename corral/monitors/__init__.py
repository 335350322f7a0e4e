"""Monitors: constraints computed while generating (see ``docs/design.md``, "Monitors")."""
