"""fednode hub client: keep a local index of one node in sync (`fednode sync`)."""
