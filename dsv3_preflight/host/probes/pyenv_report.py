"""What a Python environment holds for a training run: its interpreter and the versions of the libraries the
preflight's checks judge with (torch and its CUDA build, NCCL's wheel, DeepSpeed, transformers, PEFT, ...).

Standard library only, and nothing imported but metadata: this file's text also runs as ``python -c`` in
*another* interpreter (the one a ``--torchrun`` command starts), which may not have dsv3-preflight installed.
It prints one JSON object when run that way. Not a probe module (it declares none): the probe
``torchrun_python`` (python_env.py) calls ``report()`` here and runs the text there.
"""
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import re
import sys

#: distributions compared, in the order a report lists them (the NCCL wheels are read as "nccl")
PACKAGES = ("torch", "deepspeed", "transformers", "peft", "accelerate", "safetensors")
NCCL_WHEELS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")


def dist_version(name):
    """The installed version of distribution ``name`` (None: not installed, or unreadable metadata)."""
    try:
        return md.version(name)
    except Exception:   # PackageNotFoundError, or a broken install's metadata
        return None


def nccl_wheel():
    """``(version, wheel)`` of the NCCL wheel installed for torch (the libnccl torch loads, so the version
    ``torch.cuda.nccl.version()`` reports), without importing torch; ``(None, None)`` without one."""
    for wheel in NCCL_WHEELS:
        version = dist_version(wheel)
        if version:
            return version, wheel
    return None, None


def torch_cuda():
    """``torch.version.cuda`` from torch/version.py, without importing torch (None: a CPU build or no torch)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        with open(os.path.join(list(spec.submodule_search_locations)[0], "version.py"), encoding="utf-8") as f:
            text = f.read(65536)
    except OSError:
        return None
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", text, re.M)
    return (m.group(1) or m.group(2) or None) if m else None


def report():
    """The environment's interpreter and library versions (plain JSON data)."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        versions[name] = dist_version(name)
    versions["torch_cuda"] = torch_cuda()
    versions["nccl"], wheel = nccl_wheel()
    return {"executable": sys.executable, "prefix": sys.prefix, "versions": versions, "nccl_wheel": wheel}


if __name__ == "__main__":
    print(json.dumps(report()))
