"""fednode command line."""
