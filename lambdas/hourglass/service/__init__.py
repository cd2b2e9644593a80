"""Use cases that combine the core with the adapters: the REST API, the sweep, the dispatch."""
