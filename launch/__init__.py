"""The gated torchrun launcher. Installed as ``dsv3_preflight.launch``."""
