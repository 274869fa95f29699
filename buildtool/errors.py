"""The one exception the host CLI turns into a one-line message and an exit code."""


class BuildError(Exception):
    """A refusal or failure to report in one line: what was found, what to do.

    exit_code follows the project's convention: 1 a build or check failed, 2 bad input.
    """

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code
