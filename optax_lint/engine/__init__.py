"""One text in, findings out: the rule loop, the filters (noqa, test files, code written to fail), the prefilter and the fix loop."""
