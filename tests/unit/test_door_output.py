"""door/output.py's hook on every logging record: a record that shows a registered secret is masked where
it is made; any other record is left as its logger made it (its msg and args, which handlers and tests
read). Run in a child interpreter: the hook is process-wide and stays once installed."""
import subprocess
import sys
from tests import REPO

CHILD = r"""
import logging
from door import output
output.install(["s3cret-token-value"])
made = []
class Keep(logging.Handler):
    def emit(self, record):
        made.append(record)
log = logging.getLogger("third.party")
log.addHandler(Keep()); log.propagate = False
log.warning("retrying %s in %d s", "https://hub.example/api", 2)
log.warning("403 for Authorization: Bearer %s", "s3cret-token-value")
try:
    raise ValueError("bad token s3cret-token-value")
except ValueError:
    log.exception("failed")
plain, secret, failed = made
assert plain.args == ("https://hub.example/api", 2) and plain.msg == "retrying %s in %d s", (plain.msg, plain.args)
assert "s3cret-token-value" not in secret.getMessage() and "***" in secret.getMessage(), secret.getMessage()
assert failed.exc_info is None and "s3cret-token-value" not in failed.exc_text and "ValueError" in failed.exc_text
print("ok")
"""


def test_a_record_without_a_secret_keeps_its_args_and_one_with_a_secret_is_masked():
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
