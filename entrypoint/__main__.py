import os
import sys

from .stop_signals import end_on_stop_signals

end_on_stop_signals()  # before anything slow: `docker stop` during the preflight ends it at once

from .device import Probe  # noqa: E402

probe = None if sys.argv[1:2] == ["fetch"] else Probe()  # the driver answers while the rest imports

from .start import main  # noqa: E402

sys.exit(main(sys.argv[1:], os.environ, probe))
