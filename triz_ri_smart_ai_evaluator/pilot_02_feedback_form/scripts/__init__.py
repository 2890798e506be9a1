"""Stand-alone scripts of pilot 02 (standard library only, runnable outside the package)."""
