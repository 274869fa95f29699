"""The outcome of one check: the shared verdict vocabulary (contract/verdict.py)."""
from contract.verdict import Result as CheckResult, Status, any_failed, failed, passed, warned  # noqa: F401
