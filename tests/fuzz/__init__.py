"""A seeded fuzz harness for every reader of bht (`make fuzz`; a sample runs in `make test`).

build.py writes valid inputs byte by byte; cases.py bends them (case i of seed s is always the
same files); run.py runs each through a loader in a forked child with time and address-space
limits, or through the real `bht` command line; campaign.py counts outcomes per reader.
"""
