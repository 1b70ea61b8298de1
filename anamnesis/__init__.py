"""Anamnesis: memory for coding agents that follows you across your machines."""

__version__ = "0.1.0"
