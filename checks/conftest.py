"""Makes `pytest checks/` collect every registered check as a test item (see dsv3_preflight.pytest_plugin)."""
from dsv3_preflight import pytest_plugin as _plugin


def pytest_addoption(parser):
    _plugin.addoption(parser)


def pytest_configure(config):
    _plugin.configure(config)


def pytest_collect_file(file_path, parent):
    return _plugin.collect_file(file_path, parent)


def pytest_runtest_logreport(report):

    _plugin.logreport(_CONFIG[0], report) if _CONFIG else None


_CONFIG: list = []


def pytest_sessionstart(session):
    _CONFIG.append(session.config)


def pytest_sessionfinish(session):
    _plugin.write_json(session)
