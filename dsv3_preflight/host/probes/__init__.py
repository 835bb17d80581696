"""Probes of the host domain (the only code of this domain that touches the system)."""
