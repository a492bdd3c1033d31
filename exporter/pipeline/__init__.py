"""The export pipeline: the whole export (`build`) and the delta export (`delta`), the
ledger, the cache, work forked aside, the builds' switch, and `--watch`."""
