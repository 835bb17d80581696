"""Package discovery (metadata lives in pyproject.toml).

The repo keeps checks/, launch/ and reports/ at its root; the wheel ships them as
dsv3_preflight.checks, dsv3_preflight.launch and dsv3_preflight.reports so that installing the
wheel adds no generic top-level module named checks, launch or reports to site-packages.
"""
from setuptools import find_packages, setup

MAPPED = {"dsv3_preflight.checks": "checks", "dsv3_preflight.launch": "launch", "dsv3_preflight.reports": "reports"}

packages = find_packages(include=["dsv3_preflight", "dsv3_preflight.*"])
for name, directory in MAPPED.items():
    packages += [name] + [f"{name}.{sub}" for sub in find_packages(directory)]
# directories of data files (no __init__.py) are packages too, so setuptools ships them without warnings
packages += ["dsv3_preflight.schema", "dsv3_preflight.reports.templates"]

setup(packages=sorted(set(packages)), package_dir=dict(MAPPED))
