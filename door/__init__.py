"""The one door all outside data passes through, on the host and in the image alike.

Outside data is anything this project did not write itself: a user's file or env file, a model
folder, a remote server's answer, a mirror's listing, an archive, a database, the words a third
party prints. Each kind enters through one module here, typed once, bounded (size, depth, count,
time) and refused in one line that names it:

    files     regular files only, never blocking, read up to a cap, strict UTF-8 JSON
    data      JSON (and YAML, host only) with size and depth limits
    archives  zip and tar members judged from the listing: count, contained names, no links, sizes
    paths     a local path from a remote name, resolved under its root or refused
    replace   a new copy staged beside the old, verified, then renamed in; the old one untouched on failure
    remote    bounded HTTP reads: a total deadline, byte caps on every body, bounded resumes, no page cycle
    redact    secrets out of every line the project prints
    output    third parties' log records and warnings passed through redact and the secrets in play
    children  every child process a host tool starts ends with the tool (host only: not in the image)

tests/support/hostile/ drives every entry point that reads outside data with hostile files and a
hostile HTTP peer (tests/unit/test_hostile.py, tests/image/test_hostile_image.py).

tests/unit/test_door.py fails when a module outside this package opens outside data another way.
Standard library only: the image runs this package too.
"""
