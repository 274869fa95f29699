"""`fetch REPO[@REVISION]`: a Hub model pinned to a commit, judged on the target GPU from its small
files before any weight byte is written, downloaded (resumable), every file verified against the
Hub's metadata, and a manifest written beside it. Pure decisions in request, files, judge, verify
and manifest; the Hub and the filesystem in hub and run."""
