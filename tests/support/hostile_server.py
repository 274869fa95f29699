"""The raw-socket fault injector's old name: it lives in tests/support/hostile/peer.py now, beside the
routed hostile HTTP peer (one harness); this keeps the endpoint client's tests importing it as before."""
from tests.support.hostile.peer import *  # noqa: F401,F403
from tests.support.hostile.peer import HOLD_S, Behaviour, HostileServer  # noqa: F401
