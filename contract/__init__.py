"""What both sides of the image boundary agree on, in one place: pinned versions, where things
live in the image, the environment names, and the verdict vocabulary.

Standard library only: this package is copied into the image beside `patches/` and
`entrypoint/`, and imported by the host's `build.py`, `bench/` and tests alike."""
