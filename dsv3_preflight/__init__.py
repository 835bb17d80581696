"""dsv3-preflight: preflight diagnostics for multi-node LoRA fine-tuning of DeepSeek-V3-class models."""
__version__ = "0.1.0"

from .registry import check, probe  # noqa: E402,F401  the plugin API
from .result import Result, Status  # noqa: E402,F401

__all__ = ["check", "probe", "Result", "Status", "__version__"]
