"""Files on disk: discovery, reading, the result cache, the process pool, stdin, git diffs and baselines."""
