"""Built-in checks, one concern per module. Installed as ``dsv3_preflight.checks``."""
