"""`build.py build` and `build.py verify`: the derived image, its verification, labels and fit table."""
