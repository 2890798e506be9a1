"""Executable task classes: the harness protocol, the registry, the generic runner (issue 14)."""
