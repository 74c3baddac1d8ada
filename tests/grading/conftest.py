"""Fixtures shared by the confinement tests."""

from tests.grading.confine_helpers import shared_tmp  # noqa: F401 - a fixture, used by name
