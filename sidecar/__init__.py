"""fednode sidecar: the aiohttp app that serves the bundle, open and keyed."""
